// The execution page's live parts. The page is whole without this script
// (it is rendered on the server, and a reload shows every change); with
// it, the page follows the execution: it watches it through the
// handler's API (GET api/v1/watch?id=…, one JSON event a line) and, on
// every change, reads the page again and puts the parts marked
// data-live in place, the stop form only while nothing is typed in it.
// It also reads the page every 15 seconds, for what no write tells: the
// relative times, and whether the owner's lease is still held.
"use strict";
(() => {
  const badge = document.querySelector("[data-watch]");
  if (!badge) return;
  const watchURL = badge.dataset.watch;
  const say = (on, text) => {
    badge.classList.toggle("on", on);
    badge.classList.toggle("off", !on);
    badge.textContent = text;
  };
  const revision = () => document.querySelector('[data-live="execution"]')?.dataset.revision;

  let refreshing = false;
  async function refresh() {
    if (refreshing) return;
    refreshing = true;
    try {
      const resp = await fetch(location.href, { cache: "no-store", headers: { Accept: "text/html" } });
      if (!resp.ok) return;
      const fresh = new DOMParser().parseFromString(await resp.text(), "text/html");
      for (const part of document.querySelectorAll("[data-live]")) {
        const next = fresh.querySelector(`[data-live="${part.dataset.live}"]`);
        if (!next) continue;
        const typed = part.querySelector("textarea");
        if (typed && typed.value !== "") continue; // never take an operator's words away
        part.replaceWith(document.adoptNode(next));
      }
    } catch (e) {
      // A failed read leaves the page as it was; the next event or tick reads again.
    } finally {
      refreshing = false;
    }
  }

  async function watch() {
    let wait = 1000;
    for (;;) {
      try {
        const resp = await fetch(watchURL, { cache: "no-store" });
        if (!resp.ok) throw new Error(`the watch answered ${resp.status}`);
        say(true, "live: updated on every change");
        wait = 1000;
        const lines = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffered = "";
        for (;;) {
          const { value, done } = await lines.read();
          if (done) break;
          buffered += value;
          for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
            const line = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 1);
            const ev = JSON.parse(line);
            if (ev.error) throw new Error(ev.error.message);
            // The record as the watch began: read the page again only
            // if it changed since the page was rendered.
            if (ev.type === "current" && String(ev.record.revision) === revision()) continue;
            await refresh();
          }
        }
        throw new Error("the watch ended");
      } catch (e) {
        say(false, "not live (" + e.message + "): reload to see changes");
      }
      await new Promise((r) => setTimeout(r, wait));
      wait = Math.min(wait * 2, 30000);
    }
  }

  setInterval(refresh, 15000);
  watch();
})();
