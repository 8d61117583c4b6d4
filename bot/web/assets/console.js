// thinbot web console: threads, posts streamed over Server-Sent Events,
// approval buttons. Plain JS, no build step; text is put into the page with
// textContent only, never as HTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const list = $("thread-list"), postsEl = $("posts"), titleEl = $("thread-title"), conn = $("conn");
  const form = $("composer"), text = $("text");
  let current = null, source = null;
  const posts = new Map(); // post id -> {data, el}

  function el(tag, cls, txt) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (txt !== undefined) e.textContent = txt;
    return e;
  }

  // link is an <a> to url opening in a new tab, or null unless url is an
  // absolute http(s) URL: a javascript: or data: link in an answer or an
  // alert's text must never become something to tap.
  function link(text, url) {
    let u;
    try { u = new URL(url); } catch (e) { return null; }
    if (u.protocol !== "https:" && u.protocol !== "http:") return null;
    const a = el("a", "ext", text);
    a.href = u.href; a.target = "_blank"; a.rel = "noopener noreferrer";
    a.title = u.href;
    return a;
  }

  // ---- one time-zone rule: every time in the viewer's zone, the zone
  // named, UTC on hover. The bot writes the console's texts in UTC
  // ("10:00:00 UTC", "2026-12-04 10:00:00 UTC"); withTimes shows each such
  // time in the browser's zone. A time without a date is the one nearest
  // the post's own time (anchor).
  let anchor = null;
  const utcRe = /\b(?:(\d{4})-(\d\d)-(\d\d) )?(\d\d):(\d\d)(?::(\d\d))? UTC\b/g;
  function zone(d) {
    const p = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d).find((x) => x.type === "timeZoneName");
    return p ? p.value : "";
  }
  function utcTime(m) {
    const h = +m[4], mi = +m[5], sec = m[6] ? +m[6] : 0;
    if (m[1]) return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], h, mi, sec));
    const a = anchor ? new Date(anchor) : new Date();
    let best = null;
    for (const off of [-1, 0, 1]) {
      const d = new Date(Date.UTC(a.getUTCFullYear(), a.getUTCMonth(), a.getUTCDate() + off, h, mi, sec));
      if (!best || Math.abs(d - a) < Math.abs(best - a)) best = d;
    }
    return best;
  }
  function withTimes(parent, s) {
    let last = 0, m;
    utcRe.lastIndex = 0;
    while ((m = utcRe.exec(s)) !== null) {
      const d = utcTime(m);
      if (isNaN(d)) continue;
      if (m.index > last) parent.appendChild(document.createTextNode(s.slice(last, m.index)));
      const hm = pad(d.getHours()) + ":" + pad(d.getMinutes()) + (m[6] ? ":" + pad(d.getSeconds()) : "");
      const t = el("time", "tz", (m[1] ? day(d) + " " : "") + hm + " " + zone(d));
      t.dateTime = d.toISOString(); t.title = utc(d);
      parent.appendChild(t);
      last = m.index + m[0].length;
    }
    if (last < s.length) parent.appendChild(document.createTextNode(s.slice(last)));
  }

  // inline renders `code`, **bold**, _italic_, [links](url) and bare
  // http(s) URLs, and links to the console's own threads ([text](#id), the
  // storm summary's), into parent.
  function inline(parent, s) {
    const re = /(`[^`]+`|\*\*[^*]+\*\*|(?:^|(?<=\s))_[^_]+_(?=\s|$|[.,;:!?)])|\[[^\]\n]+\]\([^()\s]+\)|\bhttps?:\/\/[^\s<>()`]*[^\s<>()`.,;:!?'"])/g;
    let last = 0, m;
    while ((m = re.exec(s)) !== null) {
      if (m.index > last) withTimes(parent, s.slice(last, m.index));
      const t = m[0];
      if (t[0] === "`") parent.appendChild(el("code", "", t.slice(1, -1)));
      else if (t[0] === "*") parent.appendChild(el("strong", "", t.slice(2, -2)));
      else if (t[0] === "[") {
        const [, text, url] = t.match(/^\[([^\]]+)\]\((.*)\)$/);
        if (/^#[A-Za-z0-9-]+$/.test(url)) {
          const a = el("a", "thread-link", text);
          a.href = url;
          parent.appendChild(a);
        } else parent.appendChild(link(text, url) || document.createTextNode(t));
      } else if (t[0] === "h") parent.appendChild(link(t, t) || document.createTextNode(t));
      else { const em = el("em"); withTimes(em, t.slice(1, -1)); parent.appendChild(em); }
      last = m.index + t.length;
    }
    if (last < s.length) withTimes(parent, s.slice(last));
  }

  // markdown renders the subset of Markdown the bot writes.
  // codeBlock is a <pre> with a Copy button; a command's output cut to its
  // first lines ("… (N more lines)") gets a button that fetches the whole
  // output from the chain (post: the post showing it).
  function codeBlock(body, li, root, post) {
    const box = el("div", "code");
    const pre = el("pre", "", body.join("\n"));
    const copy = el("button", "copy", "Copy");
    copy.type = "button";
    copy.setAttribute("aria-label", "Copy this block");
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(pre.textContent);
        copy.textContent = "Copied";
      } catch (e) {
        const r = document.createRange(); r.selectNodeContents(pre);
        const sel = getSelection(); sel.removeAllRanges(); sel.addRange(r);
        copy.textContent = document.execCommand("copy") ? "Copied" : "Press Ctrl+C";
      }
      setTimeout(() => { copy.textContent = "Copy"; }, 2000);
    });
    box.appendChild(copy);
    box.appendChild(pre);
    const more = (body[body.length - 1] || "").match(/^… \((\d+) more lines\)$/);
    const code = li && li.querySelector("code");
    if (more && code && post && current) {
      const command = code.textContent;
      let n = 0;
      for (const other of root.querySelectorAll("li")) {
        if (other === li) break;
        const c = other.querySelector("code");
        if (c && c.textContent === command) n++;
      }
      pre.textContent = body.slice(0, -1).join("\n");
      const btn = el("button", "more link", "… (" + more[1] + " more lines)");
      btn.type = "button";
      const thread = current;
      let full = null, short = pre.textContent;
      btn.addEventListener("click", async () => {
        if (full !== null) {
          const open = pre.textContent === full;
          pre.textContent = open ? short : full;
          btn.textContent = open ? "… (" + more[1] + " more lines)" : "Show less";
          return;
        }
        btn.disabled = true;
        try {
          const res = await api("GET", "/api/threads/" + encodeURIComponent(thread) + "/output?command=" + encodeURIComponent(command) +
            "&after=" + encodeURIComponent(post.time) + "&n=" + n);
          full = res.output.replace(/\n$/, "");
          pre.textContent = full;
          btn.textContent = "Show less";
          btn.title = "The whole output, from the chain (event #" + res.seq + ")" + (res.truncated ? "; cut at 8 MiB" : "");
        } catch (e) {
          btn.after(el("div", "note", "Could not fetch the output: " + e.message));
        } finally {
          btn.disabled = false;
        }
      });
      box.appendChild(btn);
    }
    return box;
  }

  function markdown(src, post) {
    const root = el("div", "md");
    const lines = src.split("\n");
    let i = 0, para = null, ul = null;
    const flush = () => { para = null; ul = null; };
    while (i < lines.length) {
      const line = lines[i];
      const fence = line.match(/^\s*```/);
      if (fence) {
        const indent = line.match(/^\s*/)[0].length;
        // An indented fence belongs to the list item above (a step's output).
        const li = indent > 0 && ul && ul.lastChild ? ul.lastChild : null;
        if (li) para = null; else flush();
        const body = [];
        i++;
        while (i < lines.length && !/^\s*```/.test(lines[i])) { body.push(lines[i].slice(Math.min(indent, lines[i].match(/^\s*/)[0].length))); i++; }
        i++;
        (li || root).appendChild(codeBlock(body, li, root, post));
        continue;
      }
      const item = line.match(/^\s*[-*] (.*)$/);
      if (item) {
        if (!ul) { ul = el("ul"); root.appendChild(ul); }
        para = null;
        const li = el("li"); inline(li, item[1]); ul.appendChild(li);
      } else if (line.trim() === "") {
        flush();
      } else if (ul && /^\s{2,}/.test(line)) {
        inline(ul.lastChild, " " + line.trim());
      } else {
        ul = null;
        if (!para) { para = el("p"); root.appendChild(para); } else { para.appendChild(el("br")); }
        inline(para, line);
      }
      i++;
    }
    return root;
  }

  // Times show in the viewer's zone, 24 hours, the zone named, with the
  // UTC time on hover.
  function pad(n) { return String(n).padStart(2, "0"); }
  function day(d) { return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()); }
  function clock(t) { const d = new Date(t); return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()); }
  function when(t) {
    const d = new Date(t), now = new Date();
    if (d.toDateString() === now.toDateString()) return clock(d) + " " + zone(d);
    return day(d) + " " + clock(d) + " " + zone(d);
  }
  function utc(t) { return new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC"); }
  function timeEl(t) { const e = el("time", "", when(t)); e.dateTime = new Date(t).toISOString(); e.title = utc(t); return e; }

  function initials(name) { return (name || "?").slice(0, 2).toUpperCase(); }

  function renderPost(p) {
    const wrap = el("div", "post " + (p.bot ? "bot" : "user") + (p.streaming ? " streaming" : "") +
      (p.buttons && p.buttons.length ? " ask" : ""));
    wrap.id = "post-" + p.id;
    wrap.appendChild(el("div", "avatar", p.bot ? "tb" : initials(p.author)));
    const b = el("div", "bubble");
    const head = el("div", "post-head");
    head.appendChild(el("strong", "", p.author));
    head.appendChild(timeEl(p.time));
    b.appendChild(head);
    anchor = p.time;
    b.appendChild(markdown(p.text || "", p));
    if (p.file) {
      const a = el("a", "", "⤓ " + p.file + " (" + p.file_size + " bytes)");
      a.href = "/api/threads/" + encodeURIComponent(current) + "/posts/" + encodeURIComponent(p.id) + "/file";
      b.appendChild(a);
    }
    if (p.buttons && p.buttons.length) {
      const acts = el("div", "actions");
      for (const btn of p.buttons) {
        const x = el("button", btn.style || "", btn.label);
        x.dataset.action = btn.id;
        x.addEventListener("click", () => click(p.id, btn.id, acts));
        acts.appendChild(x);
      }
      b.appendChild(acts);
    }
    wrap.appendChild(b);
    return wrap;
  }

  function upsert(p) {
    const intro = $("intro");
    if (intro) intro.remove();
    const old = posts.get(p.id);
    const node = renderPost(p);
    if (old) old.el.replaceWith(node); else postsEl.appendChild(node);
    posts.set(p.id, { data: p, el: node });
  }

  // busy shows what the run does: "thinking" between a message and the
  // model's first word, and the Stop button (it sends /stop) while the
  // model thinks or writes or a command runs.
  function updateBusy() {
    const all = [...posts.values()].map((x) => x.data);
    const last = all[all.length - 1];
    // A run's status post reads "_Working on it…_" until the run ends.
    const working = all.filter((p) => p.bot && /^_Working on it…_/.test(p.text || ""));
    const sent = !!last && !last.bot && !/^[/!]/.test(last.text || "") && !$("model-problem");
    // The model's words show in a streamed post, or in the status post
    // below its steps after a blank line (a slow start).
    const writing = all.some((p) => p.streaming && p.text) ||
      working.some((p) => /\n\n\S/.test(p.text));
    const command = working.some((p) => / — (running|waiting for approval)/.test(p.text || ""));
    const active = sent || working.length > 0 || all.some((p) => p.streaming);
    const thinking = active && !writing && !command;
    let th = $("thinking");
    if (thinking && !th) {
      th = el("div", "thinking");
      th.id = "thinking";
      th.appendChild(el("div", "avatar", "tb"));
      th.appendChild(el("div", "bubble", "thinking…"));
      postsEl.appendChild(th);
    } else if (!thinking && th) {
      th.remove();
    } else if (th && th !== postsEl.lastElementChild) {
      postsEl.appendChild(th);
    }
    // A screen reader announces new posts (aria-live), once the text has
    // stopped changing rather than at each streamed word.
    postsEl.setAttribute("aria-busy", writing ? "true" : "false");
    const stop = $("stop");
    if (stop) stop.hidden = !active;
  }

  function scrollDown() { postsEl.scrollTop = postsEl.scrollHeight; }

  async function api(method, path, body) {
    const r = await fetch(path, { method, headers: body ? { "Content-Type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined, credentials: "same-origin" });
    let data = {};
    try { data = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error(data.error || (r.status + " " + r.statusText));
    return data;
  }

  // click decides a request: from its post in the thread, or from the
  // inbox (thread given); both are the same request to the server.
  async function click(pid, action, acts, thread) {
    for (const b of acts.querySelectorAll("button")) b.disabled = true;
    try {
      const res = await api("POST", "/api/threads/" + encodeURIComponent(thread || current) + "/posts/" + encodeURIComponent(pid) + "/click", { action });
      if (res.ephemeral) {
        const n = el("div", "note", res.ephemeral);
        n.setAttribute("role", "status");
        if (thread) $("inbox-note").replaceChildren(n); else acts.after(n);
      }
    } catch (e) {
      const n = el("div", "note", "Could not send the click: " + e.message);
      if (thread) $("inbox-note").replaceChildren(n); else acts.after(n);
    } finally {
      for (const b of acts.querySelectorAll("button")) b.disabled = false;
      refreshInbox();
    }
  }

  // ---- the pending-approvals inbox ----
  const inboxEl = $("inbox"), inboxList = $("inbox-list"), inboxCount = $("inbox-count"),
    inboxOpen = $("inbox-open"), notifyBtn = $("notify"), baseTitle = document.title;
  let seen = null, mayDecide = false; // seen: the requests known (null before the first load)

  function ago(t) {
    const s = Math.max(0, Math.round((Date.now() - new Date(t)) / 1000));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  function notifyOn() {
    return "Notification" in window && window.Notification.permission === "granted" && localStorage.getItem("thinbot.notify") === "1";
  }

  function showNotifyButton() {
    // Browsers offer notifications to secure pages only (https, or a loopback address).
    notifyBtn.hidden = !("Notification" in window) || !window.isSecureContext || !mayDecide || notifyOn();
  }

  function notify(it) {
    const n = new window.Notification("Approval needed: " + it.title, {
      body: (it.requester ? it.requester + " asks: " : "") + (it.text.split("\n").find((l) => l.includes("`")) || it.text).slice(0, 160),
      tag: it.thread + "/" + it.post,
    });
    n.onclick = () => { window.focus(); location.hash = it.thread; };
  }

  // renderInbox updates the list in place: an item whose request did not
  // change keeps its element (only its "waiting" and "expires" texts are
  // rewritten), so a refresh (every 4 s, and at each event) never replaces
  // a button under the pointer or the keyboard focus. Replaced between a
  // press and its release, an Approve click would be lost.
  function renderInbox(items) {
    inboxCount.textContent = String(items.length);
    inboxOpen.classList.toggle("has", items.length > 0);
    inboxOpen.setAttribute("aria-label", items.length + " approval request(s) pending");
    document.title = (items.length ? "(" + items.length + ") " : "") + baseTitle;
    const old = new Map();
    for (const li of inboxList.children) if (li.dataset.key) old.set(li.dataset.key, li);
    const want = [];
    for (const it of items) {
      const key = it.thread + "/" + it.post;
      const sig = JSON.stringify([it.title, it.requester, it.mine, it.text, it.buttons, it.expires, mayDecide]);
      let li = old.get(key);
      if (!li || li.dataset.sig !== sig) li = inboxItem(it, key, sig);
      inboxTimes(li, it);
      want.push(li);
    }
    if (!want.length) want.push(inboxList.querySelector("li.empty") || el("li", "muted empty", "Nothing waits for a decision."));
    want.forEach((li, i) => { if (inboxList.children[i] !== li) inboxList.insertBefore(li, inboxList.children[i] || null); });
    while (inboxList.children.length > want.length) inboxList.lastElementChild.remove();
  }

  // inboxTimes writes an item's age and time left.
  function inboxTimes(li, it) {
    const age = li.querySelector(".age");
    age.textContent = "waiting " + ago(it.asked);
    age.title = "asked " + utc(it.asked);
    const x = li.querySelector(".expires");
    if (x && it.expires) {
      const left = new Date(it.expires) - Date.now();
      x.className = "expires" + (left < 5 * 60000 ? " late" : "");
      x.textContent = "expires " + clock(it.expires) + " " + zone(new Date(it.expires)) + " (in " + ago(Date.now() - Math.max(0, left)) + ")";
      x.title = utc(it.expires);
    }
  }

  function inboxItem(it, key, sig) {
    const li = el("li", "item");
    li.dataset.thread = it.thread; li.dataset.post = it.post;
    li.dataset.key = key; li.dataset.sig = sig;
    const meta = el("div", "i-meta");
    const a = el("a", "", it.title);
    a.href = "#" + it.thread;
    a.addEventListener("click", () => { inboxEl.hidden = true; });
    meta.appendChild(a);
    if (it.requester) meta.appendChild(el("span", "", "asked by " + it.requester + (it.mine ? " (you)" : "")));
    meta.appendChild(el("span", "age", ""));
    if (it.expires) meta.appendChild(el("span", "expires", ""));
    li.appendChild(meta);
    anchor = it.asked;
    li.appendChild(markdown(it.text));
    if (mayDecide) {
      const acts = el("div", "actions");
      for (const btn of it.buttons) {
        const x = el("button", btn.style || "", btn.label);
        x.dataset.action = btn.id;
        x.addEventListener("click", () => click(it.post, btn.id, acts, it.thread));
        acts.appendChild(x);
      }
      li.appendChild(acts);
    } else {
      li.appendChild(el("div", "muted", "Deciding needs the approver role."));
    }
    return li;
  }

  let inboxBusy = false;
  async function refreshInbox() {
    if (inboxBusy) return;
    inboxBusy = true;
    try {
      const data = await api("GET", "/api/inbox");
      mayDecide = data.may_decide;
      showNotifyButton();
      const keys = new Set(data.items.map((it) => it.thread + "/" + it.post));
      if (seen !== null && notifyOn()) {
        for (const it of data.items) {
          if (!seen.has(it.thread + "/" + it.post) && mayDecide && !it.mine) notify(it);
        }
      }
      seen = keys;
      renderInbox(data.items);
    } catch (e) {
      /* the next refresh tries again */
    } finally {
      inboxBusy = false;
    }
  }

  inboxOpen.addEventListener("click", () => { inboxEl.hidden = !inboxEl.hidden; if (!inboxEl.hidden) refreshInbox(); });
  $("inbox-close").addEventListener("click", () => { inboxEl.hidden = true; });
  notifyBtn.addEventListener("click", async () => {
    const p = await window.Notification.requestPermission();
    if (p === "granted") localStorage.setItem("thinbot.notify", "1");
    showNotifyButton();
  });

  // On a phone the threads list and the thread are two views.
  function showThread(on) { document.body.classList.toggle("in-thread", on); }

  function open(id) {
    showThread(true);
    if (source) source.close();
    current = id;
    posts.clear();
    postsEl.replaceChildren();
    for (const a of list.querySelectorAll("a")) a.classList.toggle("on", a.dataset.id === id);
    const a = list.querySelector("a[data-id='" + CSS.escape(id) + "']");
    titleEl.textContent = a ? a.querySelector(".t-title").textContent : "Thread";
    $("thread-state").replaceChildren();
    source = new EventSource("/api/threads/" + encodeURIComponent(id) + "/events");
    source.onopen = () => { conn.textContent = "live"; conn.className = "conn live"; };
    source.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "conn"; };
    source.onmessage = (m) => {
      const ev = JSON.parse(m.data);
      const atEnd = postsEl.scrollHeight - postsEl.scrollTop - postsEl.clientHeight < 40;
      // Every page hears of every thread's title and state ("thread").
      if (ev.thread) showMeta(ev.thread);
      if (ev.type === "thread") return;
      if (ev.type === "snapshot") {
        posts.clear(); postsEl.replaceChildren();
        for (const p of ev.posts) upsert(p);
        updateBusy();
        scrollDown();
        return;
      }
      if (ev.type === "append") {
        const cur = posts.get(ev.post.id);
        if (cur) { cur.data.text += ev.delta; upsert(cur.data); }
      } else if (ev.post) {
        upsert(ev.post);
      }
      updateBusy();
      if (atEnd || ev.type === "post") scrollDown();
      if (ev.type !== "append") refreshInbox();
    };
  }

  // states renders a thread's state as badges: its alert's (firing,
  // resolved), and what it does (waiting for approval, running), or idle.
  function states(t) {
    const box = el("span", "states");
    const badge = (s) => { const b = el("span", "state s-" + s.split(" ")[0], s); box.appendChild(b); };
    if (t.alert) badge(t.alert);
    if ((t.state && t.state !== "idle") || !t.alert) badge(t.state || "idle");
    return box;
  }

  // showMeta shows a thread's title and state, in the list and, for the
  // open thread, in the header.
  function showMeta(t) {
    const a = list.querySelector("a[data-id='" + CSS.escape(t.id) + "']");
    if (a) {
      a.querySelector(".t-title").textContent = t.title;
      a.querySelector(".states").replaceWith(states(t));
    } else {
      loadThreads(); // a thread the list does not have yet
    }
    if (t.id === current) {
      titleEl.textContent = t.title;
      $("thread-state").replaceWith(Object.assign(states(t), { id: "thread-state" }));
    }
  }

  async function loadThreads(select) {
    let data;
    try { data = await api("GET", "/api/threads"); } catch (e) { return; }
    list.replaceChildren();
    if (!data.threads.length) list.appendChild(el("li", "muted empty", "No threads yet."));
    for (const t of data.threads) {
      const li = el("li"), a = el("a");
      a.href = "#" + t.id; a.dataset.id = t.id;
      a.appendChild(el("span", "t-title", t.title));
      const meta = el("span", "t-meta");
      meta.appendChild(states(t));
      meta.appendChild(document.createTextNode(t.by ? t.by + " · " : ""));
      meta.appendChild(timeEl(t.updated));
      a.appendChild(meta);
      if (t.id === current) a.classList.add("on");
      li.appendChild(a); list.appendChild(li);
    }
    if (select && select !== current) open(select); // the hashchange may have opened it
    const on = current && data.threads.find((t) => t.id === current);
    if (on) showMeta(on);
  }

  function fromHash() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (id && id !== current) { inboxEl.hidden = true; open(id); }
  }

  $("new-thread").addEventListener("click", () => {
    if (source) source.close();
    source = null; current = null; posts.clear();
    history.replaceState(null, "", "/");
    titleEl.textContent = "New thread"; conn.textContent = ""; conn.className = "conn";
    $("thread-state").replaceChildren();
    postsEl.replaceChildren();
    for (const a of list.querySelectorAll("a")) a.classList.remove("on");
    showThread(true);
    if (text) text.focus();
  });

  $("back").addEventListener("click", () => {
    showThread(false);
    if (source) source.close();
    source = null; current = null;
    history.replaceState(null, "", "/");
    for (const a of list.querySelectorAll("a")) a.classList.remove("on");
  });

  if (form) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const msg = text.value.trim();
      if (!msg) return;
      // Cleared now: what is typed while this is sent is the next message.
      text.value = "";
      $("send").disabled = true;
      try {
        if (current) {
          await api("POST", "/api/threads/" + encodeURIComponent(current) + "/messages", { text: msg });
        } else {
          const res = await api("POST", "/api/threads", { text: msg });
          location.hash = res.id;
          await loadThreads(res.id);
        }
      } catch (err) {
        if (!text.value) text.value = msg;
        postsEl.appendChild(el("div", "note", "Not sent: " + err.message));
      } finally {
        $("send").disabled = false;
        text.focus();
      }
    });
    $("stop").addEventListener("click", async () => {
      if (!current) return;
      try {
        await api("POST", "/api/threads/" + encodeURIComponent(current) + "/messages", { text: "/stop" });
      } catch (err) {
        postsEl.appendChild(el("div", "note", "Could not stop: " + err.message));
      }
    });
    text.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
    });
  }

  window.addEventListener("hashchange", fromHash);
  loadThreads().then(fromHash);
  refreshInbox();
  setInterval(() => loadThreads(), 5000);
  setInterval(refreshInbox, 4000);
})();
