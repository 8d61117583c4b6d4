// thinbot's pages write times in UTC (<time class="utc">, or text such as
// "2026-12-04 10:00:00 UTC"); this shows each in the viewer's zone,
// 24 hours, the zone named, with UTC on hover: the same rule as the
// console's posts. Without script the UTC time stays.
"use strict";
(function () {
  const pad = (n) => String(n).padStart(2, "0");
  const local = (d) => {
    const z = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d).find((x) => x.type === "timeZoneName");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + (z ? " " + z.value : "");
  };
  for (const t of document.querySelectorAll("time.utc[datetime]")) {
    const d = new Date(t.dateTime);
    if (isNaN(d)) continue;
    t.title = t.textContent;
    t.textContent = local(d);
    t.classList.replace("utc", "local");
  }
  // Times written into the text (an alert's start and end), outside code.
  const re = /\b(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) UTC\b/g;
  const has = new RegExp(re.source); // not global: test() keeps no state
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => n.parentElement.closest("pre, code, script, time, textarea") || !has.test(n.data) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const found = [];
  while (walk.nextNode()) found.push(walk.currentNode);
  for (const n of found) {
    const frag = document.createDocumentFragment();
    let last = 0, m;
    re.lastIndex = 0;
    while ((m = re.exec(n.data)) !== null) {
      const d = new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]));
      frag.appendChild(document.createTextNode(n.data.slice(last, m.index)));
      const t = document.createElement("time");
      t.className = "local"; t.dateTime = d.toISOString(); t.title = m[0]; t.textContent = local(d);
      frag.appendChild(t);
      last = m.index + m[0].length;
    }
    frag.appendChild(document.createTextNode(n.data.slice(last)));
    n.replaceWith(frag);
  }
})();
