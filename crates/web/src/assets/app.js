// Lazarus web view: the small script. Pages are complete without it (server-rendered HTML);
// it adds the token prompt (the token lives in this tab's session storage and travels in an
// Authorization header, never in a URL), live updates, relative times, and — on the
// gateway — sending a message, forking and downloading.
(function () {
  'use strict';
  var KEY = 'lazarus.token';
  var liveCtl = null;

  function token() {
    try { return sessionStorage.getItem(KEY); } catch (e) { return null; }
  }
  function tokenMode() { return document.body.dataset.auth === 'token'; }
  function headers(extra) {
    var h = extra || {};
    var t = token();
    if (t) { h.Authorization = 'Bearer ' + t; }
    return h;
  }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

  // ---- navigation with the token: fetch the page with the header and swap it in ----
  function swap(doc, url, push) {
    if (liveCtl) { liveCtl.abort(); liveCtl = null; }
    document.title = doc.title;
    var b = document.body;
    Array.prototype.slice.call(b.attributes).forEach(function (a) { b.removeAttribute(a.name); });
    Array.prototype.forEach.call(doc.body.attributes, function (a) { b.setAttribute(a.name, a.value); });
    var nodes = Array.prototype.map.call(doc.body.childNodes, function (n) { return document.importNode(n, true); });
    b.replaceChildren.apply(b, nodes);
    if (push) { history.pushState({}, '', url); }
    init();
    var hash = location.hash && document.getElementById(location.hash.slice(1));
    if (hash) { hash.scrollIntoView(); } else if (push) { window.scrollTo(0, 0); }
  }

  function navigate(url, push) {
    return fetch(url, { headers: headers(), cache: 'no-store' }).then(function (r) {
      return r.text().then(function (text) {
        var doc = new DOMParser().parseFromString(text, 'text/html');
        swap(doc, url, push);
        if (r.status === 401) {
          try { sessionStorage.removeItem(KEY); } catch (e) { /* private mode */ }
          var err = document.getElementById('token-error');
          if (err) { err.textContent = 'That token was refused.'; err.hidden = false; }
        }
      });
    });
  }

  function sameOrigin(href) {
    try { return new URL(href, location.href).origin === location.origin; } catch (e) { return false; }
  }

  document.addEventListener('click', function (ev) {
    var a = ev.target.closest && ev.target.closest('a[href]');
    if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) { return; }
    if (a.hasAttribute('data-export')) {
      if (!tokenMode()) { return; }
      ev.preventDefault();
      download(a);
      return;
    }
    if (!tokenMode() || !token() || !sameOrigin(a.href)) { return; }
    var u = new URL(a.href);
    if (u.pathname === location.pathname && u.search === location.search && u.hash) { return; }
    ev.preventDefault();
    navigate(u.pathname + u.search + u.hash, true);
  });

  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    if (f.matches('form.filters') && tokenMode() && token()) {
      ev.preventDefault();
      var q = new URLSearchParams(new FormData(f)).toString();
      navigate('/' + (q ? '?' + q : ''), true);
    } else if (f.id === 'token-form') {
      ev.preventDefault();
      var v = document.getElementById('token-input').value.trim();
      if (!v) { return; }
      try { sessionStorage.setItem(KEY, v); } catch (e) { /* private mode */ }
      navigate(location.pathname + location.search + location.hash, false);
    } else if (f.id === 'composer') {
      ev.preventDefault();
      send(f);
    } else if (f.matches('form.fork-form')) {
      ev.preventDefault();
      fork(f);
    } else if (f.matches('form.approval-form')) {
      ev.preventDefault();
      decide(f, ev.submitter);
    }
  });

  window.addEventListener('popstate', function () {
    if (tokenMode() && token()) { navigate(location.pathname + location.search + location.hash, false); }
  });

  // ---- download the exact JSONL (the token travels in a header, so fetch it) ----
  function download(a) {
    fetch(a.getAttribute('href'), { headers: headers() }).then(function (r) {
      if (!r.ok) { throw new Error('HTTP ' + r.status); }
      return r.blob();
    }).then(function (blob) {
      var url = URL.createObjectURL(blob);
      var tmp = document.createElement('a');
      tmp.href = url;
      tmp.download = a.getAttribute('download') || 'session.jsonl';
      document.body.appendChild(tmp);
      tmp.click();
      tmp.remove();
      setTimeout(function () { URL.revokeObjectURL(url); }, 10000);
    }).catch(function (e) { note('download failed: ' + e.message); });
  }

  function note(text) {
    var n = document.getElementById('live-note');
    if (n) { n.textContent = text; }
  }

  // ---- relative times ("3 min ago"), the exact time stays in the title ----
  function ago(ts, now) {
    var s = Math.floor((now - ts) / 1000);
    if (s < 10) { return 'just now'; }
    if (s < 60) { return s + ' s ago'; }
    if (s < 3600) { return Math.floor(s / 60) + ' min ago'; }
    if (s < 172800) { return Math.floor(s / 3600) + ' h ago'; }
    if (s < 5184000) { return Math.floor(s / 86400) + ' days ago'; }
    return new Date(ts).toISOString().slice(0, 10);
  }
  function refreshTimes() {
    var now = Date.now();
    document.querySelectorAll('time[datetime]').forEach(function (t) {
      var ts = Date.parse(t.getAttribute('datetime'));
      if (!isNaN(ts)) { t.textContent = ago(ts, now); }
    });
  }
  setInterval(refreshTimes, 30000);

  // ---- live updates: the SSE stream read with fetch (EventSource cannot send a header) ----
  function setLive(text) {
    var s = document.getElementById('live-state');
    if (s) { s.textContent = text; s.hidden = !text; }
    document.body.dataset.live = text;
  }

  function startLive(sec) {
    var ctl = new AbortController();
    liveCtl = ctl;
    var last = Number(sec.dataset.lastSeq) || 0; // the last record the stream gave us
    var rendered = last; // the last record the page shows
    var busy = false, again = false;

    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(sec.dataset.fragment + '?after=' + rendered, { headers: headers(), cache: 'no-store', signal: ctl.signal })
        .then(function (r) { if (!r.ok) { throw new Error('HTTP ' + r.status); } return r.text(); })
        .then(function (text) {
          var doc = new DOMParser().parseFromString(text, 'text/html');
          var up = doc.getElementById('update');
          if (!up) { return; }
          ['session-head', 'damage', 'thread', 'conversation'].forEach(function (id) {
            var now = document.getElementById(id), next = doc.getElementById(id);
            if (now && next) { now.replaceWith(document.importNode(next, true)); }
          });
          var tl = document.getElementById('timeline');
          // the entries only (a call card's steps are list items too)
          up.querySelectorAll(':scope > ol > li').forEach(function (li) {
            var node = document.importNode(li, true);
            var old = document.getElementById(li.id);
            if (old) { old.replaceWith(node); } else { tl.appendChild(node); }
          });
          var empty = document.getElementById('empty-note');
          if (empty && tl.children.length) { empty.remove(); }
          rendered = Math.max(rendered, Number(up.dataset.lastSeq) || 0);
          sec.dataset.lastSeq = String(rendered);
          refreshTimes();
        })
        .catch(function () { /* the next event or reconnect tries again */ })
        .then(function () {
          busy = false;
          if (again) { again = false; refresh(); }
        });
    }

    // a run can end without a new record: while the head says running, look again now and then
    var poll = setInterval(function () {
      if (ctl.signal.aborted) { clearInterval(poll); return; }
      if (document.querySelector('#session-head .status.st-running')) { refresh(); }
    }, 2000);

    function handle(ev) {
      if (ev.id !== undefined && /^\d+$/.test(ev.id)) { last = Math.max(last, Number(ev.id)); }
      if (ev.event === 'record') { refresh(); }
    }

    (async function loop() {
      var delay = 300;
      while (!ctl.signal.aborted) {
        try {
          setLive(last === (Number(sec.dataset.lastSeq) || 0) && delay === 300 ? 'connecting' : 'reconnecting');
          var r = await fetch(sec.dataset.stream, {
            headers: headers({ Accept: 'text/event-stream', 'Last-Event-ID': String(last) }),
            cache: 'no-store',
            signal: ctl.signal
          });
          if (!r.ok || !r.body) { throw new Error('HTTP ' + r.status); }
          setLive('live');
          delay = 300;
          // records may have arrived while we were away: the fragment brings them
          if (last > rendered) { refresh(); }
          var reader = r.body.getReader(), dec = new TextDecoder(), buf = '', ev = {};
          for (;;) {
            var chunk = await reader.read();
            if (chunk.done) { break; }
            buf += dec.decode(chunk.value, { stream: true });
            var m;
            while ((m = /\r\n|\r|\n/.exec(buf))) {
              var line = buf.slice(0, m.index);
              buf = buf.slice(m.index + m[0].length);
              if (line === '') { handle(ev); ev = {}; continue; }
              if (line[0] === ':') { continue; }
              var c = line.indexOf(':');
              var field = c < 0 ? line : line.slice(0, c);
              var value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
              if (field === 'id') { ev.id = value; } else if (field === 'event') { ev.event = value; } else if (field === 'data') { ev.data = (ev.data ? ev.data + '\n' : '') + value; }
            }
          }
        } catch (e) {
          if (ctl.signal.aborted) { return; }
        }
        setLive('reconnecting');
        await sleep(delay);
        delay = Math.min(delay * 2, 5000);
      }
    })();
  }

  // ---- actions (gateway only) ----
  function newMessageId() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return 'web-' + Array.prototype.map.call(b, function (x) { return ('0' + x.toString(16)).slice(-2); }).join('');
  }

  // An API answer's JSON body; an error answer throws with the gateway's own words.
  function answer(r) {
    return r.json().catch(function () { return {}; }).then(function (j) {
      if (!r.ok) {
        var msg = (j.error && (j.error.message || j.error)) || j.message || ('HTTP ' + r.status);
        throw new Error(typeof msg === 'string' ? msg : JSON.stringify(msg));
      }
      return j;
    });
  }

  function initComposer(f) {
    var idEl = document.getElementById('composer-id');
    f.dataset.messageId = newMessageId();
    idEl.textContent = f.dataset.messageId;
    f.dataset.sending = '';
    document.getElementById('composer-text').addEventListener('input', function () {
      // a new text is a new message; the id stays fixed while one is being sent
      if (!f.dataset.sending && f.dataset.failed !== 'retry') {
        f.dataset.messageId = newMessageId();
        idEl.textContent = f.dataset.messageId;
      }
      f.dataset.failed = '';
    });
  }

  function send(f) {
    if (f.dataset.sending) { return; } // a double click: the first send is under way
    var text = document.getElementById('composer-text').value;
    if (!text.trim()) { return; }
    var status = document.getElementById('composer-status');
    var button = f.querySelector('button[type=submit]');
    var mid = f.dataset.messageId;
    f.dataset.sending = '1';
    button.disabled = true;
    status.className = '';
    status.textContent = 'sending…';
    fetch('/v1/sessions/' + encodeURIComponent(f.dataset.session) + '/messages', {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify({ message_id: mid, text: text })
    }).then(function (r) {
      return answer(r).then(function (j) {
        document.getElementById('composer-text').value = '';
        status.textContent = (j.duplicate ? 'already recorded as #' : 'recorded as #') + j.seq;
        f.dataset.messageId = newMessageId();
        document.getElementById('composer-id').textContent = f.dataset.messageId;
      });
    }).catch(function (e) {
      // the same message id is kept: sending again records it once
      status.className = 'err';
      status.textContent = 'not sent: ' + e.message + ' (sending again keeps the message id)';
      f.dataset.failed = 'retry';
    }).then(function () {
      f.dataset.sending = '';
      button.disabled = false;
    });
  }

  // A decision on a call waiting for approval: one per call, recorded once (a double click
  // or a retry sends the same decision, which the gateway answers as a duplicate).
  function decide(f, button) {
    if (!button || f.dataset.sending) { return; }
    var status = f.querySelector('.approval-status');
    var reason = f.querySelector('input[name=reason]').value.trim();
    var body = { decision: button.value };
    if (button.value === 'allow') { body.scope = button.dataset.scope; }
    if (reason) { body.reason = reason; }
    f.dataset.sending = '1';
    f.querySelectorAll('button').forEach(function (b) { b.disabled = true; });
    status.className = 'approval-status';
    status.textContent = 'sending…';
    fetch('/v1/sessions/' + encodeURIComponent(f.dataset.session) + '/approvals/' + encodeURIComponent(f.dataset.call), {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json', 'X-Lazarus-Via': 'web' }),
      body: JSON.stringify(body)
    }).then(function (r) {
      return answer(r).then(function (j) {
        status.textContent = (button.value === 'allow' ? 'allowed' : 'denied') +
          (j.result === 'duplicate' ? ' (already recorded)' : j.result === 'queued' ? ' (queued for the session\'s writer)' : ' (recorded as #' + j.seq + ')');
      });
    }).catch(function (e) {
      status.className = 'approval-status err';
      status.textContent = 'not recorded: ' + e.message;
      f.querySelectorAll('button').forEach(function (b) { b.disabled = false; });
    }).then(function () { f.dataset.sending = ''; });
  }

  function fork(f) {
    var sec = document.getElementById('session');
    var err = f.querySelector('.form-error');
    var idIn = f.querySelector('input[name=id]');
    var body = { at_turn: Number(f.dataset.turn) };
    if (idIn && idIn.value.trim()) { body.id = idIn.value.trim(); }
    fetch('/v1/sessions/' + encodeURIComponent(sec.dataset.session) + '/fork', {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json' }),
      body: JSON.stringify(body)
    }).then(function (r) {
      return answer(r).then(function (j) {
        var url = '/sessions/' + encodeURIComponent(j.id);
        if (tokenMode()) { navigate(url, true); } else { location.href = url; }
      });
    }).catch(function (e) {
      err.textContent = e.message;
      err.hidden = false;
    });
  }

  // ---- per page ----
  function init() {
    var page = document.body.dataset.page;
    var forget = document.getElementById('forget-token');
    if (forget) {
      forget.hidden = !token();
      forget.addEventListener('click', function () {
        try { sessionStorage.removeItem(KEY); } catch (e) { /* private mode */ }
        location.reload();
      });
    }
    if (page === 'token') {
      var form = document.getElementById('token-form');
      if (form) { form.hidden = false; }
      var input = document.getElementById('token-input');
      if (token() && !document.getElementById('token-error').textContent) {
        // a token from earlier in this tab: use it
        navigate(location.pathname + location.search + location.hash, false);
        return;
      }
      if (input) { input.focus(); }
      return;
    }
    if (page === 'session') {
      var sec = document.getElementById('session');
      var composer = document.getElementById('composer');
      if (composer) { initComposer(composer); }
      if (sec && sec.dataset.stream) { startLive(sec); }
    }
    document.body.dataset.ready = '1';
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
})();
