// Live updates for open sessions: a small poller, no framework.
// The list refreshes the rows of open sessions and says when new sessions started; the
// session page refreshes its state and appends events stored since the page was drawn.
// Polling stops when nothing is open any more and pauses while the tab is hidden.
(function () {
  "use strict";

  var INTERVAL = 5000;

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "—";
    var total = Math.round(seconds);
    if (total < 60) return total + " s";
    var minutes = Math.floor(total / 60), secs = total % 60;
    if (minutes < 60) return minutes < 10 && secs ? minutes + " min " + String(secs).padStart(2, "0") + " s" : minutes + " min";
    var hours = Math.floor(minutes / 60);
    minutes = minutes % 60;
    if (hours < 24) return hours + " h " + String(minutes).padStart(2, "0") + " min";
    return Math.floor(hours / 24) + " d " + (hours % 24) + " h";
  }

  function setText(root, name, value) {
    var el = root.querySelector('[data-live="' + name + '"]');
    if (el && value !== undefined && el.textContent !== String(value)) el.textContent = value;
  }

  function applyState(root, state) {
    var badge = root.querySelector('[data-live="status"]');
    if (badge && badge.textContent !== state.status_label) {
      badge.textContent = state.status_label;
      badge.className = "badge s-" + state.status;
    }
    setText(root, "event_count", state.event_count);
    setText(root, "compaction_count", state.compaction_count);
    setText(root, "duration", duration(state.duration_seconds));
    if (state.end_reason) setText(root, "end_reason", state.end_reason);
    if (state.ended_at) setText(root, "ended_at", state.ended_at.replace("T", " ").slice(0, 19));
  }

  function poll(fn) {
    var timer = null, stopped = false;
    function tick() {
      timer = null;
      if (stopped) return;
      if (document.hidden) { schedule(); return; }
      fn().then(function (more) {
        if (more === false) { stopped = true; return; }
        schedule();
      }, schedule);
    }
    function schedule() { if (!stopped && timer === null) timer = setTimeout(tick, INTERVAL); }
    document.addEventListener("visibilitychange", function () { if (!document.hidden) schedule(); });
    schedule();
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); });
  }

  // The session list.
  var list = document.querySelector("[data-live-list]");
  if (list) {
    var notice = document.querySelector("[data-live-notice]");
    var since = list.getAttribute("data-since");
    poll(function () {
      var rows = list.querySelectorAll('tr[data-open="1"]');
      var ids = Array.prototype.map.call(rows, function (r) { return r.getAttribute("data-session-id"); });
      if (!ids.length && !since) return Promise.resolve(false);
      var url = list.getAttribute("data-url") + "?ids=" + encodeURIComponent(ids.join(","));
      if (since) url += "&since=" + encodeURIComponent(since);
      return getJSON(url).then(function (body) {
        body.sessions.forEach(function (state) {
          var row = list.querySelector('tr[data-session-id="' + state.id + '"]');
          if (!row) return;
          applyState(row, state);
          row.setAttribute("data-open", state.open ? "1" : "0");
        });
        if (notice && body.new_sessions) {
          notice.hidden = false;
          notice.innerHTML = "";
          var link = document.createElement("a");
          link.href = window.location.href;
          link.textContent = body.new_sessions + (body.new_sessions === 1 ? " new session" : " new sessions") + " started — show";
          notice.appendChild(link);
        }
        return true;
      });
    });
  }

  // One session's page.
  var head = document.querySelector("[data-live-session]");
  if (head && head.getAttribute("data-open") === "1") {
    var after = head.getAttribute("data-after") || "0";
    var timeline = document.querySelector("[data-live-timeline]");
    poll(function () {
      return getJSON(head.getAttribute("data-url") + "?after=" + encodeURIComponent(after)).then(function (body) {
        applyState(document, body.session);
        if (body.events_html && timeline) {
          var before = timeline.lastElementChild;
          timeline.insertAdjacentHTML("beforeend", body.events_html);
          var node = before ? before.nextElementSibling : timeline.firstElementChild;
          for (; node; node = node.nextElementSibling) node.classList.add("is-new");
        }
        after = String(body.last_event_id);
        return body.session.open;
      });
    });
  }
})();
