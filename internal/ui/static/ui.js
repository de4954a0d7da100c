// Keeps the page's content live: the server sends the content again whenever what it shows changes, and the
// state of its connection to the cluster. No other script runs on these pages.
(function () {
  "use strict";
  var main = document.getElementById("content");
  var banner = document.getElementById("connection");
  var why = document.getElementById("connection-why");
  if (!main || !main.hasAttribute("data-live") || !window.EventSource) {
    return;
  }
  function connection(text) {
    why.textContent = text;
    banner.hidden = text === "";
  }
  var source = new EventSource("/live?page=" + encodeURIComponent(location.pathname + location.search));
  source.addEventListener("content", function (e) {
    main.innerHTML = e.data; // rendered and escaped by the server's templates
  });
  source.addEventListener("connection", function (e) {
    connection(e.data);
  });
  source.onerror = function () {
    connection("the view's server does not answer; retrying");
  };
})();
