// Progressive enhancement only: the filters apply as soon as a select or the checkbox changes.
// Without JavaScript the "Apply" button does the same.
(function () {
  var form = document.querySelector("form.filters");
  if (!form) return;
  form.addEventListener("change", function (event) {
    if (event.target.matches("select, input[type=checkbox]")) form.submit();
  });
})();
