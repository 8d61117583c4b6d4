// thinbot's pages write times in UTC (<time class="utc">); this shows each
// in the viewer's zone, 24 hours, the zone named, with UTC on hover: the
// same rule as the console's posts. Without script the UTC time stays.
"use strict";
(function () {
  const pad = (n) => String(n).padStart(2, "0");
  for (const t of document.querySelectorAll("time.utc[datetime]")) {
    const d = new Date(t.dateTime);
    if (isNaN(d)) continue;
    const z = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d).find((x) => x.type === "timeZoneName");
    t.title = t.textContent;
    t.textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + (z ? " " + z.value : "");
    t.classList.replace("utc", "local");
  }
})();
