// tritonsuite's report page: draws its Plotly figures as they come into view, sorts tables by a click on a header,
// shows a table's other columns, and filters blocks and rows. Hand-written; reads only this page.
(function () {
  'use strict';
  var figures = JSON.parse(document.getElementById('figures').textContent);

  function draw(el) {
    if (el.dataset.drawn) { return; }
    el.dataset.drawn = '1';
    var spec = figures[el.dataset.figure];
    window.Plotly.newPlot(el, spec.data, spec.layout, {displaylogo: false, responsive: true});
  }
  var plots = document.querySelectorAll('.plot');
  if ('IntersectionObserver' in window) {
    var seen = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) { seen.unobserve(e.target); draw(e.target); }
      });
    }, {rootMargin: '300px'});
    plots.forEach(function (el) { seen.observe(el); });
  } else {
    plots.forEach(draw);
  }
  window.tritonsuiteDrawAll = function () { plots.forEach(draw); return plots.length; };

  function key(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ''; }
    var raw = cell.hasAttribute('data-value') ? cell.getAttribute('data-value') : cell.textContent;
    var n = Number(raw);
    return raw !== '' && !isNaN(n) ? n : raw;
  }
  function sortBy(th) {
    var table = th.closest('table');
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var ascending = th.getAttribute('aria-sort') !== 'ascending';
    th.parentNode.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, index), y = key(b, index), c;
      if (typeof x === 'number' && typeof y === 'number') { c = x - y; }
      else if (typeof x === 'number') { c = -1; }  // cells without a figure ("-") last
      else if (typeof y === 'number') { c = 1; }
      else { c = String(x).localeCompare(String(y)); }
      return ascending ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll('table.sortable th').forEach(function (th) {
    th.addEventListener('click', function () { sortBy(th); });
    th.addEventListener('keydown', function (e) { if (e.key === 'Enter') { sortBy(th); } });
  });
  document.querySelectorAll('button.more').forEach(function (button) {
    button.addEventListener('click', function () {
      var table = button.parentNode.querySelector('table');
      var all = table.classList.toggle('all');
      button.textContent = all ? 'main columns' : 'all columns';
    });
  });

  var selects = document.querySelectorAll('#filters select');
  function apply() {
    var want = {};
    selects.forEach(function (s) { if (s.value) { want[s.dataset.key] = s.value; } });
    var shown = 0, rows = 0;
    document.querySelectorAll('[data-block]').forEach(function (b) {
      b.hidden = !['scenario', 'model', 'format', 'precision'].every(function (k) {
        var have = b.dataset[k];
        return !want[k] || (have !== undefined && have.split(' ').indexOf(want[k]) >= 0);
      });
      var visible = 0;
      b.querySelectorAll('tr[data-status]').forEach(function (r) {
        r.hidden = !!want.status && r.dataset.status !== want.status;
        if (!r.hidden) { visible += 1; }
      });
      if (want.status && visible === 0) { b.hidden = true; }
      if (!b.hidden) { shown += 1; rows += visible; }
    });
    document.getElementById('shown').textContent = shown + ' sections, ' + rows + ' rows shown';
  }
  selects.forEach(function (s) { s.addEventListener('change', apply); });
  apply();
}());
