// The dashboard page's behaviour. The pointer readout: over a chart, the values of
// each series nearest the pointer's time. On a live page (the body names where to ask
// for news), the sections are asked for again and swapped in when they change; the
// server waits until there is news before answering, so this is one request in flight,
// not a clock. Text from servers is only ever set as text or comes inside sections the
// dashboard escaped.
(function () {
  "use strict";
  // Numbers as the tables and axes print them (charts::readable): about four
  // significant digits, every digit of the integer part, thousands grouped, scientific
  // notation for the tiny and the huge.
  var digits = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 4 });
  var whole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  var tiny = new Intl.NumberFormat("en-US", { notation: "scientific", maximumSignificantDigits: 4 });
  function readable(v) {
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a < 1e-4 || a >= 1e9) return tiny.format(v).replace("E", "e");
    return (a >= 1000 ? whole : digits).format(v);
  }
  function mmss(s) {
    s = Math.max(0, Math.round(s));
    var m = Math.floor(s / 60), r = s % 60;
    return (m < 10 ? "0" : "") + m + ":" + (r < 10 ? "0" : "") + r;
  }
  // The point of `points` ([[t, v], ...], by time) nearest to time `t`.
  function nearest(points, t) {
    var lo = 0, hi = points.length - 1;
    if (hi < 0) return null;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (points[mid][0] < t) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && Math.abs(points[lo - 1][0] - t) <= Math.abs(points[lo][0] - t)) lo -= 1;
    return points[lo];
  }
  // Where the pointer was, per chart, so that a chart redrawn under it keeps its readout.
  var pointer = {};
  function show(figure, data, fraction) {
    var out = figure.querySelector(".readout");
    var cursor = figure.querySelector(".cursor");
    if (fraction === null) {
      out.textContent = "";
      if (cursor) cursor.remove();
      return;
    }
    var x = data.x[0] + fraction * (data.x[1] - data.x[0]);
    var t = (x - data.x[0]) / (data.x[1] - data.x[0]) * data.span;
    if (!cursor) {
      cursor = document.createElement("div");
      cursor.className = "cursor";
      figure.appendChild(cursor);
    }
    var svg = figure.querySelector("svg");
    cursor.style.left = (x / data.width * svg.getBoundingClientRect().width) + "px";
    out.textContent = "";
    out.appendChild(document.createTextNode(mmss(t)));
    data.lines.forEach(function (line) {
      var p = nearest(line.points, t);
      if (!p) return;
      var swatch = document.createElement("b");
      swatch.style.background = line.color;
      out.appendChild(swatch);
      out.appendChild(document.createTextNode(line.label + " " + readable(p[1])));
    });
  }
  function bind() {
    document.querySelectorAll("figure.chart[data-readout]").forEach(function (figure) {
      var data = JSON.parse(figure.getAttribute("data-readout"));
      var name = figure.getAttribute("data-name");
      var svg = figure.querySelector("svg");
      if (!svg) return;
      function at(event) {
        var box = svg.getBoundingClientRect();
        var x = (event.clientX - box.left) / box.width * data.width;
        if (x < data.x[0] || x > data.x[1]) return null;
        return (x - data.x[0]) / (data.x[1] - data.x[0]);
      }
      svg.addEventListener("mousemove", function (event) {
        pointer[name] = at(event);
        show(figure, data, pointer[name]);
      });
      svg.addEventListener("mouseleave", function () {
        pointer[name] = null;
        show(figure, data, null);
      });
      if (pointer[name] !== undefined && pointer[name] !== null) show(figure, data, pointer[name]);
    });
  }
  function swap(sections) {
    var checked = {};
    document.querySelectorAll("input[type=checkbox]:checked").forEach(function (box) {
      checked[box.name + "=" + box.value] = true;
    });
    Object.keys(sections).forEach(function (name) {
      var section = document.getElementById("s-" + name);
      if (section) section.innerHTML = sections[name];
    });
    document.querySelectorAll("input[type=checkbox]").forEach(function (box) {
      if (checked[box.name + "=" + box.value]) box.checked = true;
    });
    bind();
  }
  var news = document.body.getAttribute("data-news");
  function follow() {
    var version = document.body.getAttribute("data-version");
    var url = news + (news.indexOf("?") < 0 ? "?" : "&") + "version=" + encodeURIComponent(version);
    fetch(url, { cache: "no-store" }).then(function (reply) {
      if (reply.status === 200) return reply.json();
      if (reply.status === 204) return null;
      throw new Error("the dashboard answered " + reply.status);
    }).then(function (update) {
      if (update) {
        document.body.setAttribute("data-version", String(update.version));
        swap(update.sections);
        if (update.over) return;
      }
      follow();
    }, function () {
      // The dashboard went away or the link broke: try again later, quietly.
      setTimeout(follow, 2000);
    });
  }
  bind();
  if (news) follow();
})();
