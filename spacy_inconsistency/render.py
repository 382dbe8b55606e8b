"""A self-contained HTML picture of contradiction findings (displaCy-style).

Each finding is drawn as its two units, highlighted in their context, side
by side, joined by a link that carries the score; the units link to each
other (`#finding-N-a` / `#finding-N-b`). The page has no scripts and no
external resources, so it can be mailed or archived as one file.

    from spacy_inconsistency.render import render_docs, render_findings
    html = render_docs(nlp.pipe(texts))            # doc._.contradictions
    html = render_findings(find_contradictions(nlp, docs))
"""
import html
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from spacy.tokens import Doc

from .errors import Errors
from .extensions import CONTRADICTIONS, INCONSISTENCIES

Group = Tuple[str, Union[None, str, Dict[int, str]], List[Dict[str, Any]]]

STYLE = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:2em;color:#222;background:#fafafa}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:2em;border-bottom:1px solid #ddd}
.finding{display:flex;align-items:center;gap:0;margin:1.2em 0;background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:.8em}
.unit{flex:1 1 0;line-height:2.1;font-size:15px}
.unit mark{background:#ffd5cc;border-radius:4px;padding:.2em .35em;box-decoration-break:clone;-webkit-box-decoration-break:clone}
.unit-b mark{background:#cce5ff}
.unit .source{display:inline-block;font-size:11px;font-weight:bold;text-transform:uppercase;letter-spacing:.05em;background:#444;color:#fff;border-radius:3px;padding:0 .4em;margin-right:.4em;line-height:1.6}
.unit .context{color:#777}
.unit a.jump{font-size:11px;margin-left:.3em;color:#0645ad;text-decoration:none}
.link{flex:0 0 130px;text-align:center}
.link svg{display:block;margin:auto}
.link .score{font-weight:bold;font-size:14px}
.empty{color:#777;font-style:italic}
.why{display:block;font-size:11px;color:#555;margin-top:.2em;line-height:1.4}
"""
# Alignment features shown under a finding's score: those that moved its log-odds most.
WHY_FEATURES = 3


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _unit_html(
    finding_id: str, side: str, unit: Dict[str, Any], text: Union[None, str, Dict[int, str]], context_chars: int
) -> str:
    if isinstance(text, dict):
        text = text.get(unit.get("doc"))  # type: ignore[arg-type]
    other = "b" if side == "a" else "a"
    source = unit.get("source") or unit.get("speaker") or ""
    parts = [f'<div class="unit unit-{side}" id="{finding_id}-{side}">']
    if source:
        parts.append(f'<span class="source">{_escape(str(source))}</span>')
    start, end = unit.get("start_char"), unit.get("end_char")
    if text is not None and start is not None and end is not None and text[start:end] == unit["text"]:
        before = text[max(0, start - context_chars) : start]
        after = text[end : end + context_chars]
        # Cut the context at a space so that no word is shown in part.
        if start > context_chars and " " in before:
            before = before[before.index(" ") :]
        if end + context_chars < len(text) and " " in after:
            after = after[: after.rindex(" ")]
        lead = "…" if start > context_chars else ""
        tail = "…" if end + context_chars < len(text) else ""
        parts.append(f'<span class="context">{lead}{_escape(before)}</span>')
        parts.append(f"<mark>{_escape(unit['text'])}</mark>")
        parts.append(f'<span class="context">{_escape(after)}{tail}</span>')
    else:
        parts.append(f"<mark>{_escape(unit['text'])}</mark>")
    parts.append(f'<a class="jump" href="#{finding_id}-{other}" title="the other side">&#8596; {other.upper()}</a>')
    parts.append("</div>")
    return "".join(parts)


def _why_html(evidence: Any) -> str:
    """Both directions' P(contradiction) and the alignment features that moved the score most."""
    if not isinstance(evidence, dict):
        return ""
    lines = []
    contradiction = (evidence.get("nli") or {}).get("contradiction")
    if isinstance(contradiction, (list, tuple)) and len(contradiction) == 2:
        lines.append(f"NLI {float(contradiction[0]):.2f} / {float(contradiction[1]):.2f}")
    alignment = evidence.get("alignment") or {}
    shown = list(alignment.items())[:WHY_FEATURES]
    if shown:
        lines.append(", ".join(f"{name.replace('_', ' ')} {float(v):+.1f}" for name, v in shown))
    if not lines:
        return ""
    title = "P(contradiction) both ways; log-odds each alignment feature added to the score"
    return "".join(f'<span class="why" title="{_escape(title)}">{_escape(line)}</span>' for line in lines)


def _link_html(score: float, evidence: Any = None) -> str:
    # The stroke gets darker and thicker as the score rises.
    width = 1 + 3 * max(0.0, min(1.0, score))
    shade = int(200 - 170 * max(0.0, min(1.0, score)))
    return (
        '<div class="link">'
        f'<span class="score">{score:.2f}</span>'
        f'<svg width="120" height="24" viewBox="0 0 120 24" role="img" aria-label="contradiction score {score:.2f}">'
        f'<line x1="6" y1="12" x2="114" y2="12" stroke="rgb({shade},{shade // 3},{shade // 3})" '
        f'stroke-width="{width:.1f}"/>'
        '<circle cx="6" cy="12" r="4" fill="#e06c5a"/><circle cx="114" cy="12" r="4" fill="#4a90d9"/>'
        "</svg><span>contradiction</span>" + _why_html(evidence) + "</div>"
    )


def _check_findings(findings: Any) -> List[Dict[str, Any]]:
    if not isinstance(findings, (list, tuple)) or not all(
        isinstance(f, dict) and "units" in f and "score" in f for f in findings
    ):
        raise TypeError(Errors.E185.format(type=type(findings).__name__))
    return list(findings)


def render_groups(groups: Iterable[Group], *, title: str = "Contradictions", context_chars: int = 80) -> str:
    """An HTML page of groups of findings (one group per document or comparison).

    groups (Iterable[Tuple[str, Union[None, str, Dict[int, str]], List[dict]]]):
        (heading, the text the unit offsets point into - or a dict from
        each unit's `doc` index to its text, or None -, findings).
    title (str): Page title.
    context_chars (int): Characters of context shown around each unit.
    RETURNS (str): The HTML page.
    """
    body = [f"<h1>{_escape(title)}</h1>"]
    n = 0
    for heading, text, findings in groups:
        findings = _check_findings(findings)
        body.append(f'<section class="group"><h2>{_escape(heading)}</h2>')
        if not findings:
            body.append('<p class="empty">No contradictions found.</p>')
        for finding in findings:
            a, b = finding["units"][:2]
            fid = f"finding-{n}"
            body.append(
                f'<div class="finding" id="{fid}" data-score="{float(finding["score"]):.4f}">'
                + _unit_html(fid, "a", a, text, context_chars)
                + _link_html(float(finding["score"]), finding.get("evidence"))
                + _unit_html(fid, "b", b, text, context_chars)
                + "</div>"
            )
            n += 1
        body.append("</section>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_escape(title)}</title><style>{STYLE}</style></head>"
        f'<body data-findings="{n}">' + "\n".join(body) + "</body></html>\n"
    )


def render_findings(
    findings: Sequence[Dict[str, Any]],
    *,
    title: str = "Contradictions",
    texts: Optional[Dict[int, str]] = None,
    context_chars: int = 80,
) -> str:
    """An HTML page of findings from `compare_docs` / `find_contradictions`.

    findings (Sequence[dict]): The findings (units with `source` labels).
    title (str): Page title.
    texts (Optional[Dict[int, str]]): Doc index -> text, to show context.
    context_chars (int): Characters of context shown around each unit.
    RETURNS (str): The HTML page.
    """
    page = render_groups([("", texts, findings)], title=title, context_chars=context_chars)
    return page.replace("<h2></h2>", "")


def render_docs(
    docs: Iterable[Doc], *, title: str = "Contradictions", key: Optional[str] = None, context_chars: int = 80
) -> str:
    """An HTML page of the findings stored on processed Docs.

    docs (Iterable[Doc]): Docs processed by `contradiction_detector` or
        `inconsistency_detector`.
    title (str): Page title.
    key (Optional[str]): The extension to read; None takes
        `doc._.contradictions`, else `doc._.inconsistencies`.
    context_chars (int): Characters of context shown around each unit.
    RETURNS (str): The HTML page.
    """
    groups: List[Group] = []
    for i, doc in enumerate(docs):
        names = [key] if key else [CONTRADICTIONS, INCONSISTENCIES]
        findings = None
        for name in names:
            if Doc.has_extension(name) and getattr(doc._, name) is not None:
                findings = getattr(doc._, name)
                break
        heading = str(doc.user_data.get("source", f"Document {i + 1}"))
        groups.append((heading, doc.text, findings or []))
    return render_groups(groups, title=title, context_chars=context_chars)
