// trio-agent view: live update. The page's <body data-live="/api/...?v=VERSION"> names
// what to poll; when the session (or the list) changes, the page reloads in place.
// No other script runs on these pages (the server's Content-Security-Policy says so).
(function () {
  "use strict";
  var live = document.body.getAttribute("data-live");
  if (!live) { return; }
  var url = new URL(live, window.location.href);
  var version = url.searchParams.get("v");
  url.searchParams.delete("v");
  var delay = 1000;
  function poll() {
    fetch(url.toString(), { cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (data && data.version !== version) {
          window.location.reload();
          return;
        }
        window.setTimeout(poll, delay);
      })
      .catch(function () { window.setTimeout(poll, delay * 3); });
  }
  window.setTimeout(poll, delay);
})();
