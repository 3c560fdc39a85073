// The schedule editor's live preview: while the reader types, ask the server for the coming nights
// of the times as typed (the planner runs on the server; nothing is computed here) and show them.
// Without this script the "Show the preview" button does the same with a full page.
(function () {
  "use strict";
  var form = document.getElementById("schedule-form");
  var target = document.getElementById("preview");
  if (!form || !target || !window.fetch) { return; }
  var timer = null;
  var latest = 0;
  function refresh() {
    var query = new URLSearchParams();
    var enabled = form.querySelector("#enabled");
    if (enabled && enabled.checked) { query.append("enabled", "1"); }
    form.querySelectorAll("input[name=times]").forEach(function (input) {
      query.append("times", input.value);
    });
    var ask = ++latest;
    fetch(form.dataset.preview + "?" + query.toString(), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html !== null && ask === latest) { target.innerHTML = html; }
      })
      .catch(function () { /* the saved preview stays; saving still checks everything */ });
  }
  form.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  });
})();
