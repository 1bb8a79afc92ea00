// The approvals page, live: progressive enhancement over plain forms (the page works without it).
// It follows /events (server-sent events from the server's one watch of the store) and draws
// the list again when something it shows changed; it posts the forms with fetch, so the
// answer appears on the page and the list is drawn again.
(function () {
  "use strict";
  var body = document.body;
  var page = body.getAttribute("data-page");
  var runId = body.getAttribute("data-run");
  var target = page === "approvals" ? "approvals" : page === "run" ? "run" : null;
  if (!target) return;
  var url = page === "approvals" ? "/fragment/approvals" + window.location.search
                                  : "/fragment/runs/" + encodeURIComponent(runId);
  var busy = false, again = false;

  function notice(words, ok) {
    var el = document.getElementById("notice");
    if (!el) return;
    el.textContent = words;
    el.className = ok ? "" : "bad";
  }

  // Someone is typing in the list (a reason, edited arguments): it is not drawn again under them.
  function typing(box) {
    return box.contains(document.activeElement) && document.activeElement.tagName !== "BUTTON" &&
      document.activeElement.value;
  }

  function redraw() {
    if (busy) { again = true; return; }
    var box = document.getElementById(target);
    if (!box) return;
    if (typing(box)) { again = true; return; }
    busy = true;
    fetch(url, {credentials: "same-origin", headers: {"Accept": "text/html"}}).then(function (r) {
      if (r.status === 401) { window.location.reload(); return null; }
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (html === null || html === undefined) return;
      // Asked for before they began typing, it came after: kept back, like an update that finds them typing.
      if (typing(box)) { again = true; return; }
      box.innerHTML = html;
      body.setAttribute("data-drawn", String(Date.now()));
    }).catch(function () {}).then(function () {
      busy = false;
      if (again) { again = false; setTimeout(redraw, 100); }
    });
  }

  function shows(data) {
    if (data.all) return true;
    var runs = data.runs || {};
    if (page === "run") return Object.prototype.hasOwnProperty.call(runs, runId);
    return Object.keys(runs).some(function (rid) {
      return runs[rid].some(function (kind) { return kind !== "trace"; });
    });
  }

  if (window.EventSource) {
    var source = new EventSource("/events");
    source.onopen = function () { body.setAttribute("data-live", "yes"); };
    source.onmessage = function (event) {
      try { if (shows(JSON.parse(event.data))) redraw(); } catch (e) { redraw(); }
    };
    source.onerror = function () { body.setAttribute("data-live", "no"); };
    // The login ended (the user removed, or given a new password or role): say so, and show the login.
    source.addEventListener("ended", function (event) {
      source.close();
      body.setAttribute("data-live", "no");
      try { notice(JSON.parse(event.data).words, false); } catch (e) {}
      window.location.reload();
    });
  }

  // Opening "Edit arguments" starts from the model's arguments.
  document.addEventListener("toggle", function (event) {
    var box = event.target;
    if (!box.classList || !box.classList.contains("edit") || !box.open) return;
    var area = box.querySelector("textarea");
    if (area && !area.value) {
      try { area.value = JSON.stringify(JSON.parse(area.getAttribute("data-args")), null, 2); }
      catch (e) { area.value = area.getAttribute("data-args"); }
    }
  }, true);

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !(form.classList.contains("decide") || form.classList.contains("stop"))) return;
    event.preventDefault();
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(form.action, {method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin",
                        headers: {"Accept": "application/json"}}).then(function (r) {
      return r.json().catch(function () { return {ok: false, words: "the server answered " + r.status}; });
    }).then(function (answer) {
      notice(answer.words, answer.ok);
    }).catch(function () {
      notice("the server could not be reached; nothing was sent", false);
    }).then(function () {
      buttons.forEach(function (b) { b.disabled = false; });
      redraw();
    });
  });
}());
