// judge-runner console: live refresh, nothing else. Every page is complete HTML
// without this script; with it, a page whose <main> has data-live="N" re-reads
// itself every N seconds while the tab is visible and swaps in the new <main>.
// It never refreshes while a form field has focus (keyboard users keep their
// place), and stops on anything but a 200 (an ended session: reload shows the
// login page). No inline script anywhere: the CSP forbids it.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.dataset.live) { return; }
  var seconds = Math.max(2, parseInt(main.dataset.live, 10) || 5);
  var busy = false;
  function editing() {
    var el = document.activeElement;
    return el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA");
  }
  function refresh() {
    if (busy || document.hidden || editing()) { return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store", redirect: "manual" })
      .then(function (r) {
        if (r.status !== 200) { window.clearInterval(timer); window.location.reload(); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var now = document.getElementById("main");
        if (fresh && now && !editing()) {
          now.replaceChildren.apply(now, Array.prototype.slice.call(fresh.childNodes).map(function (n) {
            return document.importNode(n, true);
          }));
        }
      })
      .catch(function () { /* the Server is away; try again next time */ })
      .then(function () { busy = false; });
  }
  var timer = window.setInterval(refresh, seconds * 1000);
}());
