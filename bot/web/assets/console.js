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

  // inline renders `code`, **bold** and _italic_ into parent.
  function inline(parent, s) {
    const re = /(`[^`]+`|\*\*[^*]+\*\*|(?:^|(?<=\s))_[^_]+_(?=\s|$|[.,;:!?)]))/g;
    let last = 0, m;
    while ((m = re.exec(s)) !== null) {
      if (m.index > last) parent.appendChild(document.createTextNode(s.slice(last, m.index)));
      const t = m[0];
      if (t[0] === "`") parent.appendChild(el("code", "", t.slice(1, -1)));
      else if (t[0] === "*") parent.appendChild(el("strong", "", t.slice(2, -2)));
      else parent.appendChild(el("em", "", t.slice(1, -1)));
      last = m.index + t.length;
    }
    if (last < s.length) parent.appendChild(document.createTextNode(s.slice(last)));
  }

  // markdown renders the subset of Markdown the bot writes.
  function markdown(src) {
    const root = el("div", "md");
    const lines = src.split("\n");
    let i = 0, para = null, ul = null;
    const flush = () => { para = null; ul = null; };
    while (i < lines.length) {
      const line = lines[i];
      const fence = line.match(/^\s*```/);
      if (fence) {
        flush();
        const indent = line.match(/^\s*/)[0].length;
        const body = [];
        i++;
        while (i < lines.length && !/^\s*```/.test(lines[i])) { body.push(lines[i].slice(Math.min(indent, lines[i].match(/^\s*/)[0].length))); i++; }
        i++;
        (ul && ul.lastChild ? ul.lastChild : root).appendChild(el("pre", "", body.join("\n")));
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

  function initials(name) { return (name || "?").slice(0, 2).toUpperCase(); }

  function renderPost(p) {
    const wrap = el("div", "post " + (p.bot ? "bot" : "user") + (p.streaming ? " streaming" : "") +
      (p.buttons && p.buttons.length ? " ask" : ""));
    wrap.id = "post-" + p.id;
    wrap.appendChild(el("div", "avatar", p.bot ? "tb" : initials(p.author)));
    const b = el("div", "bubble");
    const head = el("div", "post-head");
    head.appendChild(el("strong", "", p.author));
    head.appendChild(document.createTextNode(new Date(p.time).toLocaleTimeString()));
    b.appendChild(head);
    b.appendChild(markdown(p.text || ""));
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

  function scrollDown() { postsEl.scrollTop = postsEl.scrollHeight; }

  async function api(method, path, body) {
    const r = await fetch(path, { method, headers: body ? { "Content-Type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined, credentials: "same-origin" });
    let data = {};
    try { data = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error(data.error || (r.status + " " + r.statusText));
    return data;
  }

  async function click(pid, action, acts) {
    for (const b of acts.querySelectorAll("button")) b.disabled = true;
    try {
      const res = await api("POST", "/api/threads/" + encodeURIComponent(current) + "/posts/" + encodeURIComponent(pid) + "/click", { action });
      if (res.ephemeral) {
        const n = el("div", "note", res.ephemeral);
        n.setAttribute("role", "status");
        acts.after(n);
      }
    } catch (e) {
      acts.after(el("div", "note", "Could not send the click: " + e.message));
    } finally {
      for (const b of acts.querySelectorAll("button")) b.disabled = false;
    }
  }

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
    source = new EventSource("/api/threads/" + encodeURIComponent(id) + "/events");
    source.onopen = () => { conn.textContent = "live"; conn.className = "conn live"; };
    source.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "conn"; };
    source.onmessage = (m) => {
      const ev = JSON.parse(m.data);
      const atEnd = postsEl.scrollHeight - postsEl.scrollTop - postsEl.clientHeight < 40;
      if (ev.type === "snapshot") {
        posts.clear(); postsEl.replaceChildren();
        for (const p of ev.posts) upsert(p);
        scrollDown();
        return;
      }
      if (ev.type === "append") {
        const cur = posts.get(ev.post.id);
        if (cur) { cur.data.text += ev.delta; upsert(cur.data); }
      } else if (ev.post) {
        upsert(ev.post);
      }
      if (atEnd || ev.type === "post") scrollDown();
    };
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
      a.appendChild(el("span", "t-meta", (t.by ? t.by + " · " : "") + new Date(t.updated).toLocaleString()));
      if (t.id === current) a.classList.add("on");
      li.appendChild(a); list.appendChild(li);
    }
    if (select) open(select);
  }

  function fromHash() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (id && id !== current) open(id);
  }

  $("new-thread").addEventListener("click", () => {
    if (source) source.close();
    source = null; current = null; posts.clear();
    history.replaceState(null, "", "/");
    titleEl.textContent = "New thread"; conn.textContent = ""; conn.className = "conn";
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
      $("send").disabled = true;
      try {
        if (current) {
          await api("POST", "/api/threads/" + encodeURIComponent(current) + "/messages", { text: msg });
        } else {
          const res = await api("POST", "/api/threads", { text: msg });
          location.hash = res.id;
          await loadThreads(res.id);
        }
        text.value = "";
      } catch (err) {
        postsEl.appendChild(el("div", "note", "Not sent: " + err.message));
      } finally {
        $("send").disabled = false;
        text.focus();
      }
    });
    text.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
    });
  }

  window.addEventListener("hashchange", fromHash);
  loadThreads().then(fromHash);
  setInterval(() => loadThreads(), 10000);
})();
