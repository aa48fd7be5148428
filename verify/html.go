package verify

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// chartRows is how many of the worst entities the HTML chart draws.
const chartRows = 30

// bar is one entity's pair of bars in the chart.
type bar struct {
	Y, NewY    int
	OldW, NewW int
	Label      string
	Old, New   int64
	Match      bool
}

// htmlData feeds the page template.
type htmlData struct {
	R        *Report
	Summary  string
	Bars     []bar
	Height   int
	Entities []Result
	// Verdict is PASS or FAIL, Exit the exit status rekey verify ends
	// with for it, Why what failed.
	Verdict string
	Exit    int
	Why     string
	// Coverage says which entities were checked and why they were chosen.
	Coverage string
	// Most is the largest cell count the chart draws (its scale's end);
	// AxisY is where its axis runs.
	Most  int64
	AxisY int
	// RedoRun and RedoVerify are the commands that redo the failed
	// entities' ranges and check them again, on a failure.
	RedoRun, RedoVerify string
}

// coverage says how many entities were checked and why each was chosen.
func (r *Report) coverage() string {
	order := []string{ByAll, ByHeaviestCells, ByHeaviestBytes, BySample, ByName, ByOnly, ByNewOnly}
	words := map[string]string{ByAll: "every entity", ByHeaviestCells: "heaviest by cells", ByHeaviestBytes: "heaviest by bytes",
		BySample: "sampled", ByName: "named", ByOnly: "from an earlier report's redo list", ByNewOnly: "found only on the new side"}
	n := map[string]int{}
	for _, e := range r.Entities {
		for _, c := range e.ChosenBy {
			n[c]++
		}
	}
	var parts []string
	for _, c := range order {
		if n[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[c], words[c]))
		}
	}
	s := fmt.Sprintf("%d entities checked", len(r.Entities))
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ") + " (an entity may be chosen for more than one reason)"
	}
	return s
}

// WriteHTML writes the report as one self-contained page: inline styles, an
// inline SVG bar chart of the worst entities (old cells against new, each
// mismatch marked), the table and the differences. It fetches nothing.
func (r *Report) WriteHTML(w io.Writer) error {
	d := htmlData{R: r, Summary: r.SummaryLine(), Entities: r.Entities, Verdict: "PASS", Coverage: r.coverage()}
	if !r.OK() {
		d.Verdict, d.Exit = "FAIL", 1
		var why []string
		if r.Summary.Mismatched > 0 {
			why = append(why, fmt.Sprintf("%d of %d entities mismatched", r.Summary.Mismatched, r.Summary.Entities))
		}
		if r.Rejected != nil && r.Rejected.Unaccounted > 0 {
			why = append(why, fmt.Sprintf("%d old cells whose keys do not fit are in no reject file", r.Rejected.Unaccounted))
		}
		if r.Outside != nil && r.Outside.Cells > 0 {
			why = append(why, fmt.Sprintf("%d new cells belong to no entity", r.Outside.Cells))
		}
		d.Why = strings.Join(why, "; ")
		job, rep := r.Job, r.File
		if job == "" {
			job = "JOB"
		}
		if rep == "" {
			rep = "REPORT.json" // this report as JSON: rekey verify --out
		}
		if len(r.Redo) > 0 {
			d.RedoRun = fmt.Sprintf("rekey run %s --only %s", job, rep)
			d.RedoVerify = fmt.Sprintf("rekey verify %s --only %s", job, rep)
		}
	}
	var most int64 = 1
	n := min(len(r.Entities), chartRows)
	for _, e := range r.Entities[:n] {
		most = max(most, e.Old.Cells, e.New.Cells)
	}
	const width = 560
	for i, e := range r.Entities[:n] {
		d.Bars = append(d.Bars, bar{
			Y: 10 + i*30, NewY: 22 + i*30, Label: e.Entity, Old: e.Old.Cells, New: e.New.Cells, Match: e.Match,
			OldW: int(int64(width) * e.Old.Cells / most), NewW: int(int64(width) * e.New.Cells / most),
		})
	}
	d.Height = 20 + n*30
	d.Most, d.AxisY = most, d.Height-4
	d.Height += 20 // the axis and its labels
	return pageTmpl.Execute(w, d)
}

var pageTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rekey verify: {{.R.Old}} against {{.R.New}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.bad td { background: #fde2e1; }
.verdict-bad { color: #b00020; font-weight: bold; }
.ok { color: #1b7f3b; }
pre { background: #f6f6f6; padding: 6px; overflow-x: auto; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; }
.banner { font-size: 1.4em; font-weight: bold; padding: 8px 12px; border-radius: 4px; }
.banner.pass { background: #e3f4e8; color: #1b7f3b; }
.banner.fail { background: #fde2e1; color: #b00020; }
</style>
</head>
<body>
{{$both := eq .R.Method "both"}}<h1>rekey verify</h1>
<p id="verdict" class="banner {{if eq .Verdict "PASS"}}pass{{else}}fail{{end}}">{{.Verdict}} (exit {{.Exit}}){{if .Why}}: {{.Why}}{{end}}</p>
<p>{{.R.Old}} (old) against {{.R.New}} (new){{if .R.Job}}, job {{.R.Job}}{{end}}; started {{.R.Started.Format "2006-01-02 15:04:05 MST"}}.</p>
{{if .R.Method}}<p id="method">{{.R.MethodLine}}</p>
{{end}}<p class="{{if .R.OK}}ok{{else}}verdict-bad{{end}}" id="summary">{{.Summary}}</p>
{{with .R.Run}}<p id="run">{{.Line}}</p>
{{end}}<p id="coverage">{{.Coverage}}.{{if .R.Build}} Written by {{.R.Build}}.{{end}}</p>
{{if .RedoRun}}<h2>Redo and check again</h2>
<p>Redo the failed entities' old key ranges into the target, then check just them:</p>
<pre id="redo">{{.RedoRun}}
{{.RedoVerify}}</pre>
{{end}}
{{with .R.Rejected}}<h2>Rejected keys</h2>
<p id="rejected"{{if .Unaccounted}} class="verdict-bad"{{end}}>{{.Line}}</p>
{{range .Examples}}<pre>{{.}}</pre>
{{end}}{{end}}{{with .R.Outside}}<h2>Outside every entity</h2>
<p id="outside" class="verdict-bad">{{.Line}}</p>
{{range .Examples}}<pre>{{.Class}}: {{.New}}{{if .NewFields}}{{.NewFields}}
{{end}}why: {{.Reason}}</pre>
{{end}}{{end}}<h2>The {{len .Bars}} largest entities checked: cells in the old snapshot against the new side</h2>
<p class="legend"><span style="background:#5b8def"></span>old<span style="background:#f0a030"></span>new<span style="background:#b00020"></span>mismatch</p>
<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{{.Height}}" role="img" aria-label="cells per entity, old against new">
{{range .Bars}}<g>
<text x="0" y="{{.Y}}" dy="14" font-size="12">{{.Label}}</text>
<rect x="300" y="{{.Y}}" width="{{.OldW}}" height="11" fill="#5b8def"><title>old {{.Old}} cells</title></rect>
<rect x="300" y="{{.NewY}}" width="{{.NewW}}" height="11" fill="{{if .Match}}#f0a030{{else}}#b00020{{end}}"><title>new {{.New}} cells</title></rect>
{{if not .Match}}<text x="290" y="{{.Y}}" dy="18" font-size="14" fill="#b00020" text-anchor="end">&#x2716;</text>{{end}}
</g>
{{end}}<line x1="300" y1="{{.AxisY}}" x2="860" y2="{{.AxisY}}" stroke="#888"/>
<text x="300" y="{{.AxisY}}" dy="14" font-size="11">0</text>
<text x="860" y="{{.AxisY}}" dy="14" font-size="11" text-anchor="end">{{.Most}} cells</text>
<text x="0" y="{{.AxisY}}" dy="14" font-size="11">entity</text>
</svg>
<h2>Entities</h2>
<table>
<thead><tr><th>entity</th><th>key (hex)</th>{{if $both}}<th>method</th>{{end}}<th>chosen by</th><th>old rows</th><th>new rows</th><th>old cells</th><th>new cells</th><th>old bytes</th><th>new bytes</th><th>newer</th><th>verdict</th></tr></thead>
<tbody>
{{range .Entities}}<tr{{if not .Match}} class="bad"{{end}}><td>{{.Entity}}</td><td><code>{{.Key}}</code></td>{{if $both}}<td>{{.Method}}</td>{{end}}<td>{{range $i, $c := .ChosenBy}}{{if $i}}, {{end}}{{$c}}{{end}}</td><td>{{.Old.Rows}}</td><td>{{.New.Rows}}</td><td>{{.Old.Cells}}</td><td>{{.New.Cells}}</td><td>{{.Old.Bytes}}</td><td>{{.New.Bytes}}</td><td>{{.Newer}}</td><td{{if not .Match}} class="verdict-bad"{{end}}>{{.Verdict}}</td></tr>
{{end}}</tbody>
</table>
{{range .Entities}}{{if not .Match}}
<h3>{{.Entity}}{{if $both}} ({{.Method}}){{end}} <code>{{.Key}}</code></h3>
<p>old range {{.Old.Range.String}}, new range {{.New.Range.String}}; {{range $c, $n := .Mismatches}}{{$c}}={{$n}} {{end}}</p>
{{range .First}}<pre>{{.Class}}
{{if .Old}}old: {{.Old}}{{if .OldFields}}     {{.OldFields}}
{{end}}{{end}}{{if .New}}new: {{.New}}{{if .NewFields}}     {{.NewFields}}
{{end}}{{end}}{{if .MapsTo}}maps to: {{.MapsTo}}{{if .MapsToFields}}     {{.MapsToFields}}
{{end}}{{end}}{{if .Reason}}why: {{.Reason}}
{{end}}</pre>
{{end}}{{end}}{{end}}
</body>
</html>
`))
