// The submission page polls its live status part (the URL is the script tag's data-status-url)
// until the submission is final. A file, not an inline script: the site's CSP allows only these.
(function () {
  var script = document.currentScript;
  var url = script && script.dataset.statusUrl;
  if (!url) return;
  function poll() {
    var box = document.getElementById("submission-status");
    if (!box || box.dataset.final === "1") return;
    fetch(url, {credentials: "same-origin"}).then(function (r) { return r.text(); }).then(function (html) {
      box.outerHTML = html;
      setTimeout(poll, 2000);
    }).catch(function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 2000);
})();
