package metrics

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// The alert rules and the Grafana dashboard shipped in deploy/ are kept
// true here: they parse, and every metric and label they name is one a
// running brainbot serves.

const (
	alertsFile     = "../deploy/brainbot-alerts.yml"
	alertTestsFile = "testdata/alerts_test.yml"
	dashboardFile  = "../deploy/brainbot-dashboard.json"
)

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = []string{"job", "instance"}

// served returns every series name a running brainbot can serve, with the
// labels of each: what New registers and what run adds (Build, TrackWarm,
// TrackSpares, TrackCluster, TrackReady). A vector serves nothing before its first
// label values, so each is given one set of them, as many as its
// descriptor has labels; the gathered families then say each one's type,
// and histograms and summaries give their _bucket, _sum and _count series.
func served(t *testing.T) map[string][]string {
	t.Helper()
	m := New()
	m.Build("v1.0.0", "0123abcd")
	m.TrackWarm(func() int { return 0 })
	m.TrackSpares(func() SpareCounts { return SpareCounts{} })
	m.TrackCluster(func() ClusterState { return ClusterState{} })
	m.TrackReady(func() error { return nil })
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		with := v.Field(i).MethodByName("WithLabelValues")
		if !ok || !with.IsValid() {
			continue
		}
		args := make([]reflect.Value, labelCount(t, c))
		for j := range args {
			args[j] = reflect.ValueOf("x")
		}
		with.Call(args)
	}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string][]string{}
	for _, f := range families {
		var labels []string
		if len(f.Metric) > 0 {
			for _, l := range f.Metric[0].Label {
				labels = append(labels, l.GetName())
			}
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[f.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			names[f.GetName()+"_sum"] = labels
			names[f.GetName()+"_count"] = labels
		case dto.MetricType_SUMMARY:
			names[f.GetName()] = append(slices.Clone(labels), "quantile")
			names[f.GetName()+"_sum"] = labels
			names[f.GetName()+"_count"] = labels
		default:
			names[f.GetName()] = labels
		}
	}
	return names
}

// descLabels finds a descriptor's variable labels in its String form, the
// only way client_golang shows them.
var descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// labelCount is how many variable labels the one-descriptor collector c has.
func labelCount(t *testing.T, c prometheus.Collector) int {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1)
	c.Describe(ch)
	m := descLabels.FindStringSubmatch((<-ch).String())
	if m == nil {
		t.Fatalf("no variable labels in a vector's descriptor")
	}
	return len(strings.Split(m[1], ","))
}

// checkExpr parses a PromQL expression and checks that every series it
// selects is served, with the labels it matches on; allowed names series
// Prometheus keeps itself (up).
func checkExpr(t *testing.T, where, expr string, served map[string][]string, allowed ...string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v\n%s", where, err, expr)
		return nil
	}
	var names []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		sel, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		names = append(names, sel.Name)
		labels, known := served[sel.Name]
		switch {
		case slices.Contains(allowed, sel.Name):
			return nil
		case !known:
			t.Errorf("%s: brainbot serves no metric %q", where, sel.Name)
			return nil
		}
		for _, m := range sel.LabelMatchers {
			if m.Name != model.MetricNameLabel && !slices.Contains(labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
				t.Errorf("%s: %s has no label %q (it has %v)", where, sel.Name, m.Name, labels)
			}
		}
		return nil
	})
	return names
}

// alertRules is the rule file's form, read strictly: an unknown field is a
// mistake Prometheus would refuse.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// templateFuncs stand in for Prometheus's template functions the
// annotations may use, and templatePrelude defines its variables as
// Prometheus does, so that text/template reads the annotations as it would.
var templateFuncs = template.FuncMap{"humanize": fmt1, "humanizePercentage": fmt1, "humanizeDuration": fmt1}

const templatePrelude = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"

func fmt1(any) string { return "" }

// alertData is what Prometheus gives an annotation's template.
type alertData struct {
	Labels, ExternalLabels map[string]string
	ExternalURL            string
	Value                  float64
}

// The alerts an admin expects: not ready, a rejected token, errors,
// spending near the cap, a stuck queue, a broken brain file.
var wantAlerts = []string{"BrainbotNotReady", "BrainbotTokenRejected", "BrainbotErrorRate", "BrainbotSpendNearCap", "BrainbotWaitingQueueStuck",
	"BrainbotBrainFileInvalid"}

func TestAlertRules(t *testing.T) {
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	names := served(t)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			where := alertsFile + ": " + r.Alert
			if r.Alert == "" || slices.Contains(alerts, r.Alert) {
				t.Errorf("%s: an alert needs a name of its own", where)
			}
			alerts = append(alerts, r.Alert)
			checkExpr(t, where, r.Expr, names, "up")
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for: %v", where, err)
				}
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", where, s)
			}
			for _, key := range []string{"summary", "description"} {
				text := r.Annotations[key]
				if strings.TrimSpace(text) == "" {
					t.Errorf("%s: no %s", where, key)
				}
				tmpl, err := template.New(key).Funcs(templateFuncs).Parse(templatePrelude + text)
				if err == nil {
					err = tmpl.Execute(io.Discard, alertData{Labels: r.Labels})
				}
				if err != nil {
					t.Errorf("%s: %s: %v", where, key, err)
				}
			}
		}
	}
	for _, want := range wantAlerts {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s has no alert %s", alertsFile, want)
		}
	}
}

// promtool checks the rules as Prometheus loads them, and runs their unit
// tests (testdata/alerts_test.yml): each alert fires on the series that
// should raise it, with the words an admin reads.
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: the prometheus package); TestAlertRules still parses the rules")
	}
	for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", alertTestsFile}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboard is the part of Grafana's dashboard model checked here.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ X, W int } `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVariables are replaced before an expression is parsed as PromQL.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// labelValues is the query of a Grafana variable listing a label's values.
var labelValues = regexp.MustCompile(`^label_values\((.*), *(\w+)\)$`)

// The panels an admin expects: requests and outcomes, latency, Claude
// slots and waiting, warm processes, spares taken against missed, spend,
// Telegram errors, button taps, stops, rich-message fallbacks, guest
// answers, the cluster's partitions and NATS, the versions running.
var wantPanelMetrics = []string{
	"brainbot_requests_total", "brainbot_request_stage_seconds_bucket", "brainbot_claude_running", "brainbot_claude_waiting",
	"brainbot_claude_warm", "brainbot_claude_spares_taken_total", "brainbot_claude_spares_missed_total",
	"brainbot_cost_usd_total", "brainbot_telegram_errors_total",
	"brainbot_button_taps_total", "brainbot_stops_total", "brainbot_rich_messages_total", "brainbot_guest_answers_total",
	"brainbot_cluster_partitions_owned", "brainbot_cluster_nats_connected", "brainbot_build_info",
}

func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	names := served(t)
	for _, v := range d.Templating.List {
		q, _ := v.Query.(map[string]any)
		query, _ := q["query"].(string)
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, query)
			continue
		}
		checkExpr(t, "variable "+v.Name, m[1], names)
		if sel, _ := parser.NewParser(parser.Options{}).ParseExpr(m[1]); sel != nil {
			if vs, ok := sel.(*parser.VectorSelector); ok && !slices.Contains(append(names[vs.Name], targetLabels...), m[2]) {
				t.Errorf("variable %s: %s has no label %s", v.Name, vs.Name, m[2])
			}
		}
	}
	ids := map[int]bool{}
	var used []string
	for _, p := range d.Panels {
		where := dashboardFile + ": " + p.Title
		if ids[p.ID] {
			t.Errorf("%s: id %d is another panel's", where, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: wider than the dashboard's 24 columns", where)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%s: want queries of the dashboard's Prometheus (${datasource})", where)
		}
		for _, target := range p.Targets {
			used = append(used, checkExpr(t, where, grafanaVariables.Replace(target.Expr), names)...)
		}
	}
	for _, want := range wantPanelMetrics {
		if !slices.Contains(used, want) {
			t.Errorf("%s shows no %s", dashboardFile, want)
		}
	}
}
