// thinbot sign-in: the console's link to a thread (/#ID) survives the
// sign-in. The fragment never reaches the server; the browser keeps it
// through the redirect to /login, and a form posted to /login#ID lands,
// after the redirect that follows a good token, on the page asked for
// with #ID again.
"use strict";
(function () {
  const f = document.getElementById("login-form");
  if (f && location.hash) f.action = "/login" + location.hash;
})();
