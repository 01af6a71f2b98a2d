package recovery

import "fmt"

// Platform is what runs a controller process: whether it starts the
// controller again when it exits, and what a SIGTERM it sends means. The
// decisions take it from [Policy].Platform: a running status found at
// start resumes only where the platform restarts controllers; a SIGTERM
// relocates only where it drains them; and the exit code a controller
// leaves with is the one that makes the platform do the right thing next
// ([Action].ExitCode, [Outcome].ExitCode, [Policy.LeaveExitCode]).
//
// Use one of the named values; the zero Platform is [Unmanaged].
type Platform struct {
	// Name says which platform, in errors and logs.
	Name string
	// Restart is when the platform starts the controller again.
	Restart Restart
	// Drains: the platform sends SIGTERM to move a healthy controller
	// elsewhere (a node drain, an eviction), so a SIGTERM that is not the
	// cluster master's stop relocates restartable work. Without it a
	// SIGTERM is a stop (systemctl stop, a reboot): the controller shuts
	// the execution down.
	Drains bool
	// RelocateExitCode is what a relocating controller exits with; zero
	// means 143 (128 + SIGTERM). It is never 0: on a Kubernetes Job, a pod
	// whose container exits 0 counts as the Job's success and is not
	// replaced, which would end a relocation with nothing running.
	RelocateExitCode int
}

// Restart is when a platform starts a controller again after it exits.
type Restart uint8

// The restart settings.
const (
	// RestartNever: nothing starts the controller again (the zero value).
	RestartNever Restart = iota
	// RestartOnFailure: after a non-zero exit or a crash only (a
	// Kubernetes Job, systemd's Restart=on-failure); an exit 0 ends it.
	RestartOnFailure
	// RestartAlways: after any exit (a Kubernetes Deployment, systemd's
	// Restart=always), but a stop the platform made itself.
	RestartAlways
)

func (r Restart) String() string {
	switch r {
	case RestartNever:
		return "never"
	case RestartOnFailure:
		return "on-failure"
	case RestartAlways:
		return "always"
	}
	return fmt.Sprintf("Restart(%d)", uint8(r))
}

// The platforms.
var (
	// KubernetesJob: a pod of a Job (Teraslice's kubernetesV2 execution
	// controller). A pod that fails is replaced, one that exits 0
	// completes the Job; a node drain or an eviction sends SIGTERM to a
	// healthy controller, which relocates. kube.ControllerJob builds such
	// a Job, ignoring the relocation's exit code in its backoff limit.
	KubernetesJob = Platform{Name: "kubernetes-job", Restart: RestartOnFailure, Drains: true}
	// KubernetesDeployment: a pod of a Deployment, replaced whatever it
	// exits with; a drain sends SIGTERM, which relocates.
	KubernetesDeployment = Platform{Name: "kubernetes-deployment", Restart: RestartAlways, Drains: true}
	// SystemdOnFailure: a systemd unit with Restart=on-failure (or
	// Docker's and Nomad's on-failure policies). SIGTERM is systemctl stop
	// or a shutdown, after which systemd starts nothing: the controller
	// shuts the execution down. A crash is restarted, and resumes.
	SystemdOnFailure = Platform{Name: "systemd-on-failure", Restart: RestartOnFailure}
	// SystemdAlways: a systemd unit with Restart=always: as
	// SystemdOnFailure, an exit 0 restarted too.
	SystemdAlways = Platform{Name: "systemd-always", Restart: RestartAlways}
	// Unmanaged: nothing restarts the controller (a process started by
	// hand, a test). A running status found at start fails the execution;
	// SIGTERM shuts it down. The zero Platform.
	Unmanaged = Platform{Name: "unmanaged"}
)

// restarts reports whether the platform starts a controller again.
func (p Platform) restarts() bool { return p.Restart != RestartNever }

// relocateExitCode is what a relocating controller exits with.
func (p Platform) relocateExitCode() int {
	if p.RelocateExitCode == 0 {
		return DefaultRelocateExitCode
	}
	return p.RelocateExitCode
}

// name is the platform's name, "unmanaged" for the zero one.
func (p Platform) name() string {
	if p.Name == "" {
		return Unmanaged.Name
	}
	return p.Name
}

// check says what is wrong with p.
func (p Platform) check() error {
	switch {
	case p.Restart > RestartAlways:
		return fmt.Errorf("recovery: %w: Platform.Restart %v is none of never, on-failure, always", ErrInvalidPolicy, p.Restart)
	case p.RelocateExitCode < 0 || p.RelocateExitCode > 255:
		return fmt.Errorf("recovery: %w: Platform.RelocateExitCode %d, want 1 to 255 (0: 143)", ErrInvalidPolicy, p.RelocateExitCode)
	case p.Drains && !p.restarts():
		return fmt.Errorf("recovery: %w: Platform %s drains controllers but restarts none: a relocated execution would wait for nothing", ErrInvalidPolicy, p.name())
	}
	return nil
}
