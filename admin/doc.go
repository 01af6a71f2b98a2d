// Package admin operates a live controller: an http.Handler it mounts
// beside /metrics, serving what the execfsm CLI does (get, list by
// status, the audit trail, the table's diagram, stop with a reason,
// watch) as JSON for tools and as pages for people, and a [Client] the
// CLI's --http speaks to it with.
//
// The embedded store is the reason: bbolt lets one process open a file,
// so while a controller runs nothing else can read its executions, let
// alone stop one. Through its handler, the controller that holds the
// file does it. On etcd or Kubernetes the handler is a convenience; on
// bbolt it is the only way in.
//
// Everything reads the table the store records (package schema): which
// statuses exist, what each means, which one stops an execution. Nothing
// here assumes Teraslice's lifecycle, and without a recorded table the
// handler reads and never writes.
//
// # Mounting
//
// [NewHandler] over the controller's store, with the path it is mounted
// at ([HandlerOptions].Path, "/admin/") and an [Authorizer] if writes are
// to be allowed; register it on that path of the mux that serves
// /metrics; [Handler.Close] it before the store closes. The package's
// example does it.
//
// # Security
//
// Reads are open unless an [Authorizer] says otherwise; a write (stop)
// is refused with 403 unless the controller configured one: a controller
// exposes writes only by saying who may make them. The Authorizer sees
// every request and the [Operation] it asks, and names the actor the audit
// trail records for a write, so the trail says who the request proved to
// be, not who it claimed to be. It can read anything of the request: a
// client certificate (r.TLS), basic authentication, a header an
// authenticating proxy set.
//
// A write from another origin is refused whatever the Authorizer says
// (net/http's CrossOriginProtection: Sec-Fetch-Site, then Origin), so a
// page elsewhere cannot make an operator's browser post the stop form.
// The pages run no script but the handler's own, load nothing from
// elsewhere and may not be framed (Content-Security-Policy,
// X-Frame-Options).
//
// Every request's work on the store is bounded by
// [HandlerOptions].Timeout and ends with the request. A list is paged
// ([HandlerOptions].MaxPage). A watch is bounded three ways: at most
// MaxWatches at once, each event taken by the client within WriteTimeout
// or the watch is dropped, and nothing buffered: a watch reads the
// store's log at its client's pace. A panic in a request answers 500 and
// leaves the controller serving.
//
// # The JSON API
//
// Under Path + "api/v1/", stable within v1:
//
//	GET  executions?status=S,T&q=X&cursor=C&limit=N
//	                                              a page (q: the ids containing X): {"items": [record…], "foreign": [record…],
//	                                              "unreadable": [{"id", "revision", "error"}…],
//	                                              "next": C, "counts": {live status: n}}
//	GET  executions/ID                            a record
//	POST executions/ID/stop  {"reason", "actor", "force"}
//	                         (application/json)   {"id", "from", "to", "changed", "revision", "actor", "reason", "at",
//	                                              "warnings": [why nobody may act on it soon…]}
//	GET  watch?id=A&id=B                          newline-delimited JSON, one event a line (an id that is
//	                                              not there: "gone" at once):
//	                                              {"type": "current"|"changed"|"gone"|"unreadable", "id",
//	                                              "record" (current, changed), "error" (unreadable)}
//	GET  table                                    the recorded table (schema.Document's JSON)
//	POST executions/ID/delete {"reason", "actor", "force"}
//	                         (application/json)   {"id", "status", "revision", "actor", "reason"}: an ended
//	                                              execution removed, archived first (HandlerOptions.Archive)
//	GET  backup                                   the store's backup (HandlerOptions.Backup), its revision in
//	                                              the Execfsm-Revision header
//
// A record is storage.Record's JSON: id, status, previous, revision,
// owner, epoch, updated_at, since, reason, history (from, to, reason,
// actor, owner, epoch, at, revision), history_limit, meta. A failure is
// {"error": {"code", "message"}} with its HTTP status; the codes:
//
//	400 invalid                 a bad id (one with a control character too), reason, status, limit, or a
//	                            body that is not exactly one JSON object of the request's fields
//	401 unauthenticated         the Authorizer did not know who asked
//	403 forbidden               no Authorizer for a write, the Authorizer said no, or a cross-origin write
//	404 not_found               no such execution
//	404 no_table                the store records no table
//	404 no_route                nothing is served at that path
//	405 method_not_allowed      the path is served for other methods (Allow names them)
//	409 not_allowed             the table does not allow the move (also unknown_state, guard, no_stop, conflict)
//	409 foreign_status          the serving controller's table cannot decide on the record (Serves; force it)
//	415 unsupported_media_type  a body that is not application/json (the stop form's: not a form)
//	500 corrupt                 the record cannot be read
//	501 cannot_watch            the store cannot watch
//	503 unavailable             as many watches as allowed, or the handler is closed
//	504 timeout                 the store did not answer within Timeout
//
// A watch's stream that fails ends with that error object as its last
// line. A [Client] turns each code back into the sentinel error it came
// from, so errors.Is(err, storage.ErrNotFound) holds over HTTP as on the
// store.
//
// # Which table the controller serves
//
// The store records the newest table any controller recorded; the
// controller serving the handler may decide with an older one (a rolling
// upgrade, a rollback). Told which ([HandlerOptions].Serves,
// schema.Describe of its roles), the handler shows that version beside
// the recorded one, and refuses a stop of an execution this controller
// would not act on (a status its table lacks, or a relocation back to
// one: recovery.ErrForeignStatus, 409 foreign_status) unless the request
// forces it. Every stop that lands where no controller holds the
// execution comes back with a warning saying who will carry it out.
//
// # The pages
//
// Path is the executions: a count per status of the recorded table (in
// its order, each coloured by its role), the records of one status, those
// in a status no version of the table knows and those that cannot be read
// apart, and a search by id (a whole id opens its execution, a part of
// one lists the ids containing it). Path + "executions/ID" is one
// execution: its fields, whether a live controller holds it, its audit
// trail as a timeline (newest first, each change with when, how long the
// execution stayed in the status it entered and the revision it wrote,
// the progress writes folded into the change they follow), and a form
// that stops it (when an Authorizer is configured and the table moves it
// to its stopping status). The page follows the execution: its one
// script (Path + "assets/live.js", served by the handler, the only script
// the pages' Content-Security-Policy allows) watches it through the API
// and puts each change in place, never over a stop reason being typed;
// without the script the page is whole and a reload shows every change.
// Each open execution page holds one of the MaxWatches. Path + "diagram"
// draws the table, laid out by Graphviz's dot (go-graphviz), with the
// number of executions in each status.
package admin
