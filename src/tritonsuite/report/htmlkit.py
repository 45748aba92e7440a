"""What the HTML presenter builds its page from: escaped text and attributes, sortable tables whose rows carry what
the page's filters read, and Plotly figures kept as JSON that the page draws when they come into view. Every piece of
text goes through :func:`esc` (HTML-escaped, secrets redacted), every figure string through :func:`plot_text`
(Plotly renders a few tags in its labels, so they are escaped too), and the figures' JSON cannot close its script
element. The page's own script and styles are ``page.js`` and ``page.css`` beside this module; Plotly's is read from the
installed ``plotly`` package (:func:`plotly_js`)."""
from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tritonsuite.core.access import redact

#: the attributes of a block or a row the page's filters read, in the order the filter bar shows them
FILTERS = ("scenario", "model", "format", "precision", "status")


def esc(text: Any) -> str:
    """Text as HTML: secrets redacted, ``& < > " '`` escaped."""
    return html.escape(redact("" if text is None else str(text)), quote=True)


def attrs(**values: Any) -> str:
    """`` name="value"`` for each value that is not None (``data_model`` -> ``data-model``)."""
    return "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in values.items() if v is not None)


def plot_text(text: Any) -> str:
    """A string for a Plotly label or hover text: redacted, and its tags escaped (Plotly renders <b>, <a>, ...)."""
    return html.escape(redact("" if text is None else str(text)), quote=False)


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass
class Cell:
    text: Any
    value: float | None = None  # what sorting reads; the text when None
    cls: str | None = None


@dataclass
class Table:
    """A sortable table: ``columns`` are (header, main); the columns not main are shown a click away."""

    columns: Sequence[tuple[str, bool]]
    rows: list[tuple[list[Cell], dict[str, Any]]] = field(default_factory=list)
    cls: str = "results"

    def add(self, cells: Iterable[Cell | Any], **row_attrs: Any) -> None:
        self.rows.append(([c if isinstance(c, Cell) else Cell(c) for c in cells], row_attrs))

    def html(self) -> str:
        extra = any(not main for _, main in self.columns)
        head = "".join(f'<th{attrs(class_=None if main else "extra")} tabindex="0">{esc(name)}</th>'
                       for name, main in self.columns)
        body = []
        for cells, row_attrs in self.rows:
            tds = "".join(f"<td{attrs(class_=_classes(c.cls, None if main else 'extra'), data_value=c.value)}>"
                          f"{esc(c.text)}</td>" for c, (_, main) in zip(cells, self.columns))
            body.append(f"<tr{attrs(**{f'data_{k}': v for k, v in row_attrs.items()})}>{tds}</tr>")
        more = '<button type="button" class="more">all columns</button>' if extra else ""
        return (f'<div class="table">{more}<table class="sortable {esc(self.cls)}"><thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table></div>')


def _classes(*names: str | None) -> str | None:
    return " ".join(n for n in names if n) or None


def cell_number(value: Any, digits: int = 1, text: str | None = None) -> Cell:
    """A number's cell: formatted, sortable by its value; "-" where there is none."""
    v = number(value)
    if v is None:
        return Cell("-" if text is None else text)
    return Cell(text if text is not None else f"{v:.{digits}f}", v)


class Figures:
    """The page's Plotly figures: each ``add`` returns the element that draws it."""

    def __init__(self) -> None:
        self.specs: dict[str, dict[str, Any]] = {}

    def add(self, kind: str, title: str, traces: list[dict[str, Any]], layout: Mapping[str, Any]) -> str:
        if not traces:
            return ""
        key = f"fig{len(self.specs) + 1}"
        base = {"title": {"text": plot_text(title), "font": {"size": 13}}, "height": 340,
                "margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "legend": {"orientation": "h", "y": -0.25}}
        self.specs[key] = {"data": traces, "layout": {**base, **layout}}
        return f'<div class="plot"{attrs(data_figure=key, data_kind=kind)} role="img" aria-label="{esc(title)}"></div>'

    def json(self) -> str:
        """The figures as JSON safe inside a <script> element (no "</", "<!--", "&")."""
        text = json.dumps(self.specs, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def block(content: str, heading: str, level: int = 3, **filters: Any) -> str:
    """A section the filters show or hide: its heading, content and the filter attributes it carries (a value
    that is a list holds several: a compare table of many models)."""
    values = {f"data_{k}": " ".join(map(str, v)) if isinstance(v, (list, tuple, set)) else v
              for k, v in filters.items() if v not in (None, "", [], ())}
    return (f'<section class="block" data-block="1"{attrs(**values)}><h{level}>{esc(heading)}</h{level}>'
            f"{content}</section>")


def definition_list(items: Sequence[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items if v not in (None, "")) + "</dl>"


def asset(name: str) -> str:
    """The page's own script or styles (``page.js``, ``page.css``), hand-written, beside this module."""
    return resources.files("tritonsuite.report").joinpath(name).read_text(encoding="utf-8")


def plotly_js() -> str:
    """Plotly's bundle as the installed ``plotly`` package ships it (inlined: the page fetches nothing)."""
    import plotly

    return resources.files(plotly).joinpath("package_data", "plotly.min.js").read_text(encoding="utf-8")


def plotly_version() -> str:
    import plotly

    return str(getattr(plotly, "__version__", "?"))
