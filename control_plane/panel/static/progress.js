// A manual update's progress page: ask the panel for the run's steps every few seconds and show
// them, until the update has ended. The words come from the server, in the reader's language.
// Without this script the page refreshes itself (a <noscript> meta refresh) and has a link.
(function () {
  "use strict";
  var section = document.getElementById("progress");
  if (!section || !window.fetch) { return; }
  var list = section.querySelector("ol.progress");
  var outcome = document.getElementById("progress-outcome");
  var hint = document.getElementById("progress-hint");
  var EVERY = 2000;
  function show(progress) {
    list.innerHTML = "";
    progress.steps.forEach(function (step) {
      var item = document.createElement("li");
      item.className = "step-" + step.state;
      if (step.state === "current") { item.setAttribute("aria-current", "step"); }
      item.textContent = step.text;
      list.appendChild(item);
    });
    if (progress.done) {
      outcome.textContent = progress.outcome;
      outcome.className = progress.good ? "notice" : "warning";
      outcome.hidden = false;
      if (hint) { hint.hidden = true; }
    }
  }
  function poll() {
    fetch(section.dataset.poll, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (progress) {
        if (progress === null) { return; }  // signed out or gone: the page stays as it is
        show(progress);
        if (!progress.done) { setTimeout(poll, EVERY); }
      })
      .catch(function () { setTimeout(poll, EVERY * 3); });
  }
  setTimeout(poll, EVERY);
})();
