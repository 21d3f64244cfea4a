// Package matrix is the conformance matrix of aegis's one refusal
// vocabulary (seed 003): the declared rows of conformance/matrix.yaml,
// the cells a run of them fills in (one per row and boundary), and the
// page docs/conformance.md rendered from a run. The runner is this
// package's test (matrix_test.go); docs/design/conformance.md describes
// the format.
//
// A cell is pass, fail, not applicable or not exercised, and a cell that
// is not exercised says why: nothing is ever silently green.
package matrix

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// Boundary is one place a row runs.
type Boundary string

// The boundaries, in the order of the page's columns.
const (
	Gateway       Boundary = "gateway"        // shared/gateway in process, on the embedded store
	Serve         Boundary = "serve"          // `aegis serve` on the embedded store
	ServeDynamoDB Boundary = "serve-dynamodb" // `aegis serve --store dynamodb` on moto_server
	Lambda        Boundary = "lambda"         // the gateway bootstrap under aws-lambda-rie, recorded events
	Wrap          Boundary = "wrap"           // `aegis wrap` over a stdio child
)

// Boundaries is every boundary, in column order.
var Boundaries = []Boundary{Gateway, Serve, ServeDynamoDB, Lambda, Wrap}

// GatewayBoundaries are the boundaries a row applies to when it names
// none: the four ways the gateway runs.
var GatewayBoundaries = []Boundary{Gateway, Serve, ServeDynamoDB, Lambda}

// File is conformance/matrix.yaml.
type File struct {
	Rows []Row `yaml:"rows"`
}

// Row is one scenario and what it must produce.
type Row struct {
	ID     string `yaml:"id"`
	Title  string `yaml:"title"`
	Source string `yaml:"source"`
	// Boundaries the row applies to; empty: GatewayBoundaries. The others
	// are not applicable.
	Boundaries []Boundary `yaml:"boundaries"`
	// NotExercised: boundaries the row applies to where the runner does
	// not run it yet, each with the reason.
	NotExercised map[Boundary]string `yaml:"not_exercised"`
	// Waiting names the issue whose check the row needs: the row is not
	// exercised anywhere until it lands.
	Waiting string `yaml:"waiting"`
	// Profile is the deployment's settings: "" (default) or "off".
	Profile string `yaml:"profile"`
	// Fault is a store failure injected for the row's tenant (in process
	// only): "counters" (rate windows and the quota meter) or "stops"
	// (the kill switch's store).
	Fault   string  `yaml:"fault"`
	Setup   Setup   `yaml:"setup"`
	Request Request `yaml:"request"`
	Wrap    *WrapIn `yaml:"wrap"`
	Expect  Expect  `yaml:"expect"`
}

// Setup is the row's tenant, "m-<id>", and its one server "tools".
type Setup struct {
	Tier    string                    `yaml:"tier"`  // "" growth
	Shape   string                    `yaml:"shape"` // refusal_shape: "" error, or result
	Content map[string]string         `yaml:"content"`
	Server  string                    `yaml:"server"` // "" the matrix upstream, "down" nothing listening
	Tools   map[string]map[string]any `yaml:"tools"`
	Stops   []string                  `yaml:"stops"`
	Policy  string                    `yaml:"policy"`
	// OAuth: the tenant trusts the matrix issuer, with its
	// /t/{tenant}/v1/invoke resource as the audience and the scope "mcp"
	// required (docs/oauth.md).
	OAuth bool `yaml:"oauth"`
}

// Request is what the row sends to a gateway boundary.
type Request struct {
	Path    string            `yaml:"path"` // "" /v1/invoke; a /t/{tenant}/ path names the row's tenant or m-other
	Auth    string            `yaml:"auth"` // "" the tenant's key, none, bad, token
	Headers map[string]string `yaml:"headers"`
	Body    string            `yaml:"body"`
	// Token is the OAuth access token of auth "token", minted when the
	// run starts.
	Token *Token `yaml:"token"`
	// Session "reuse": the requests after the first carry the session
	// the first one was given.
	Session string `yaml:"session"`
	// Repeat sends the request this many times; the last answer is the
	// one checked.
	Repeat int `yaml:"repeat"`
}

// Numbering is the numbering of refusal codes the request's client reads
// (docs/error-codes.md, "Codes per protocol version"): MCP 2026-07-28's
// when its MCP-Protocol-Version header says so, else seed 004's. A row's
// expect.code is always the table's (seed 004's) code; the runner
// compares the wire code with its image in this numbering.
func (q Request) Numbering() refusal.Numbering {
	for k, v := range q.Headers {
		if strings.EqualFold(k, "MCP-Protocol-Version") && upstream.IsModern(v) {
			return refusal.MCP20260728
		}
	}
	return refusal.Seed
}

// Token is an access token the runner mints: by default signed by the
// row tenant's issuer, for its resource, with the scope "mcp", valid for
// an hour.
type Token struct {
	// Issuer "other": signed by the issuer only m-other trusts.
	Issuer string `yaml:"issuer"`
	// Audience "other": m-other's resource (a token of that tenant).
	Audience string `yaml:"audience"`
	// Scope replaces "mcp" when set.
	Scope string `yaml:"scope"`
	// Expired: exp an hour ago.
	Expired bool `yaml:"expired"`
}

// WrapIn is what a wrap row runs: `aegis wrap [--policy P]` over the
// matrix child, with these lines on its stdin.
type WrapIn struct {
	Policy string   `yaml:"policy"`
	Send   []string `yaml:"send"`
}

// Expect is what the row must produce.
type Expect struct {
	Status int    `yaml:"status"` // 0: 200
	Shape  string `yaml:"shape"`  // see Shapes
	Code   int    `yaml:"code"`
	Word   string `yaml:"word"`
	Layer  string `yaml:"layer"` // "" gateway for a refusal
	ID     string `yaml:"id"`    // the echoed id's exact bytes, when set
	// Data are members error.data must have with these values (of the
	// isError result's structuredContent.data for shape iserror);
	// DataHas members it must have at all.
	Data       map[string]any `yaml:"data"`
	DataHas    []string       `yaml:"data_has"`
	MessageHas string         `yaml:"message_has"`
	BodyHas    []string       `yaml:"body_has"`
	BodyLacks  []string       `yaml:"body_lacks"`
	HeaderHas  []string       `yaml:"header_has"`
	// HeaderContains: each header must contain each of its strings.
	HeaderContains map[string][]string `yaml:"header_contains"`
	// ChildSees "none": the child received nothing (wrap).
	ChildSees string `yaml:"child_sees"`
	// Audit is the record the last request must leave: "none", or a
	// mapping (AuditWant). AuditWhy says why there is none.
	Audit    AuditWant `yaml:"audit"`
	AuditWhy string    `yaml:"audit_why"`
}

// The shapes of an answer.
var Shapes = []string{
	"error",        // a JSON-RPC error authored by aegis (data.aegis)
	"iserror",      // a tools/call result with isError and the refusal in structuredContent
	"result",       // a JSON-RPC result
	"not-aegis",    // an answer aegis did not author: a result, or the upstream's own error
	"empty",        // HTTP 202 with an empty body
	"unauthorized", // HTTP 401 with {"error":"unauthorized: ..."}, never JSON-RPC
	"forbidden",    // HTTP 403 with {"error":"forbidden: ..."}, never JSON-RPC
	"identical",    // wrap: every byte the child wrote, and nothing else; the child got every byte sent
}

// AuditWant is the audit record a row's last request must leave. Code,
// word and layer are the row's (wrap's code is -32042).
type AuditWant struct {
	None     bool   `yaml:"-"`
	Outcome  string `yaml:"outcome"`
	Slot     string `yaml:"slot"`
	Findings bool   `yaml:"findings"`
	Degraded string `yaml:"degraded"`
	Unworded bool   `yaml:"unworded"` // any outcome, no word and no slot: the upstream's own answer
	// Code and Word: the record's, when the answer carries none (a
	// notification's 202 whose drop is audited).
	Code int    `yaml:"code"`
	Word string `yaml:"word"`
}

// UnmarshalYAML takes "none" or a mapping.
func (a *AuditWant) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "none" {
			return fmt.Errorf("line %d: audit: want none or a mapping, got %q", n.Line, n.Value)
		}
		a.None = true
		return nil
	}
	type plain AuditWant
	return n.Decode((*plain)(a))
}

// Set reports whether the row declared its audit record (or none).
func (a AuditWant) Set() bool { return a.None || a.Outcome != "" || a.Unworded }

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,58}$`)

// Load reads and checks the matrix at path.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// Applies reports whether r applies at b.
func (r Row) Applies(b Boundary) bool {
	bs := r.Boundaries
	if len(bs) == 0 {
		bs = GatewayBoundaries
	}
	return slices.Contains(bs, b)
}

// OtherTenant is the world's tenant that no row owns: it has the server
// "vault" and trusts both issuers, for its own resource.
const OtherTenant = "m-other"

// Tenant is the row's tenant id.
func (r Row) Tenant() string { return "m-" + r.ID }

// Check reports the first row that is malformed, and fails when a code
// or word of the vocabulary has no row.
func (f *File) Check() error {
	seen := map[string]bool{}
	var errs []error
	for i, r := range f.Rows {
		at := fmt.Sprintf("row %d (%s)", i+1, r.ID)
		if !idRE.MatchString(r.ID) {
			errs = append(errs, fmt.Errorf("%s: id must match %s", at, idRE))
		}
		if seen[r.ID] {
			errs = append(errs, fmt.Errorf("%s: id twice", at))
		}
		seen[r.ID] = true
		if r.Title == "" || r.Source == "" {
			errs = append(errs, fmt.Errorf("%s: needs a title and a source", at))
		}
		for _, b := range r.Boundaries {
			if !slices.Contains(Boundaries, b) {
				errs = append(errs, fmt.Errorf("%s: unknown boundary %q", at, b))
			}
		}
		for b, why := range r.NotExercised {
			if !r.Applies(b) || why == "" {
				errs = append(errs, fmt.Errorf("%s: not_exercised at %q needs a boundary the row applies to and a reason", at, b))
			}
		}
		if r.Waiting != "" || r.exercisedNowhere() {
			continue
		}
		e := r.Expect
		if !slices.Contains(Shapes, e.Shape) {
			errs = append(errs, fmt.Errorf("%s: shape %q is not one of %v", at, e.Shape, Shapes))
		}
		if !e.Audit.Set() {
			errs = append(errs, fmt.Errorf("%s: expect.audit must say which record the call leaves, or none", at))
		}
		if e.Audit.None && e.AuditWhy == "" {
			errs = append(errs, fmt.Errorf("%s: audit none needs audit_why", at))
		}
		if (e.Shape == "error" || e.Shape == "iserror") != (e.Word != "") {
			errs = append(errs, fmt.Errorf("%s: a refusal shape needs a code and a word, and only a refusal has them", at))
		}
		if e.Word != "" {
			ent, ok := entry(refusal.Word(e.Word))
			want := ent.Code
			if e.Layer == string(refusal.LayerWrap) {
				want = refusal.CodeWrapRefused
			}
			if !ok || refusal.Code(e.Code) != want {
				errs = append(errs, fmt.Errorf("%s: code %d word %s is not a row of shared/refusal's table", at, e.Code, e.Word))
			}
			if !e.Audit.None && e.Audit.Slot == "" {
				errs = append(errs, fmt.Errorf("%s: a refusal's audit record names its slot", at))
			}
		}
		if r.Applies(Wrap) != (r.Wrap != nil) {
			errs = append(errs, fmt.Errorf("%s: a wrap row has a wrap: section, and only a wrap row", at))
		}
		if (r.Request.Auth == "token") != (r.Request.Token != nil) {
			errs = append(errs, fmt.Errorf("%s: auth token needs a token:, and only it has one", at))
		}
		if tk := r.Request.Token; tk != nil {
			if !r.Setup.OAuth {
				errs = append(errs, fmt.Errorf("%s: a token row's tenant needs setup.oauth", at))
			}
			if (tk.Issuer != "" && tk.Issuer != "other") || (tk.Audience != "" && tk.Audience != "other") {
				errs = append(errs, fmt.Errorf("%s: token issuer and audience are other or unset", at))
			}
		}
		if rest, ok := strings.CutPrefix(r.Request.Path, "/t/"); ok {
			if t, _, _ := strings.Cut(rest, "/"); t != r.Tenant() && t != OtherTenant {
				errs = append(errs, fmt.Errorf("%s: path %s names tenant %q, want the row's %s or %s", at, r.Request.Path, t, r.Tenant(), OtherTenant))
			}
		}
		if r.Profile != "" && r.Profile != "off" {
			errs = append(errs, fmt.Errorf("%s: profile %q: want off or none", at, r.Profile))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return f.covers()
}

func (r Row) exercisedNowhere() bool {
	for _, b := range Boundaries {
		if r.Applies(b) && r.NotExercised[b] == "" {
			return false
		}
	}
	return true
}

func entry(w refusal.Word) (refusal.Entry, bool) {
	for _, e := range refusal.Table {
		if e.Word == w {
			return e, true
		}
	}
	return refusal.Entry{}, false
}

// covers fails when a word of the vocabulary, or wrap's -32042, has no
// row that expects it.
func (f *File) covers() error {
	words := map[string]bool{}
	wrapFrame := false
	for _, r := range f.Rows {
		words[r.Expect.Word] = true
		if refusal.Code(r.Expect.Code) == refusal.CodeWrapRefused {
			wrapFrame = true
		}
	}
	var missing []string
	for _, e := range refusal.Table {
		if !words[string(e.Word)] {
			missing = append(missing, fmt.Sprintf("%d %s", e.Code, e.Word))
		}
	}
	if !wrapFrame {
		missing = append(missing, fmt.Sprintf("%d (wrap's frame)", refusal.CodeWrapRefused))
	}
	if len(missing) > 0 {
		return fmt.Errorf("no row for %s", strings.Join(missing, ", "))
	}
	return nil
}

// Status is what a cell says.
type Status string

// The statuses of a cell.
const (
	Pass          Status = "pass"
	Fail          Status = "fail"
	NotApplicable Status = "n/a"
	NotExercised  Status = "not exercised"
)

// Cell is one row at one boundary.
type Cell struct {
	Status Status
	Reason string // why, for not exercised; what differed, for fail
}

// Results are a run's cells: row id, then boundary.
type Results map[string]map[Boundary]Cell

// Set records a cell.
func (res Results) Set(row string, b Boundary, c Cell) {
	if res[row] == nil {
		res[row] = map[Boundary]Cell{}
	}
	res[row][b] = c
}

// Planned is the cell a row has at b before anything runs: not
// applicable, not exercised with its reason, or "" (to be run).
func (r Row) Planned(b Boundary) (Cell, bool) {
	switch {
	case !r.Applies(b):
		return Cell{Status: NotApplicable}, true
	case r.Waiting != "":
		return Cell{Status: NotExercised, Reason: "waiting for " + r.Waiting}, true
	case r.NotExercised[b] != "":
		return Cell{Status: NotExercised, Reason: r.NotExercised[b]}, true
	}
	return Cell{}, false
}

// Render is docs/conformance.md for a run: the rows × boundaries table,
// then every reason a cell was not exercised. Failures are rendered too,
// but a run with one fails its test, so the committed page has none.
func Render(f *File, res Results) []byte {
	var b bytes.Buffer
	b.WriteString("# Conformance matrix\n\n")
	b.WriteString("<!-- Generated by `go test ./internal/matrix -update` from conformance/matrix.yaml; do not edit. -->\n\n")
	b.WriteString("Every row of [conformance/matrix.yaml](../conformance/matrix.yaml) run at each boundary it applies to\n")
	b.WriteString("(seed 003: one refusal vocabulary at both enforcement boundaries, every refusal recorded).\n")
	b.WriteString("A cell is **pass**, **fail**, **n/a** (the row does not apply there) or **not exercised**, with the reason\n")
	b.WriteString("under the table. A pass checks the answer (HTTP status, shape, code, word, `data.aegis.layer`, the\n")
	b.WriteString("declared data) and the audit record the call left (outcome, code, word, layer, slot), or that it left none.\n")
	b.WriteString("The format and the runner: [design/conformance.md](design/conformance.md).\n\n")
	b.WriteString("Boundaries: `gateway` shared/gateway in process on the embedded store; `serve` `aegis serve` on the embedded\n")
	b.WriteString("store; `serve-dynamodb` `aegis serve --store dynamodb` on moto_server; `lambda` the gateway bootstrap under\n")
	b.WriteString("aws-lambda-rie, requests as API Gateway events built on the recorded ones in events/gateway; `wrap` `aegis wrap`\n")
	b.WriteString("over a stdio child.\n\n")
	b.WriteString("| row | expects |")
	for _, bd := range Boundaries {
		b.WriteString(" " + string(bd) + " |")
	}
	b.WriteString("\n|---|---|")
	for range Boundaries {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var notes []string
	counts := map[Status]int{}
	for _, r := range f.Rows {
		fmt.Fprintf(&b, "| `%s` %s | %s |", r.ID, escape(r.Title), escape(r.expects()))
		for _, bd := range Boundaries {
			c := res[r.ID][bd]
			counts[c.Status]++
			switch c.Status {
			case NotExercised, Fail:
				n := len(notes) + 1
				notes = append(notes, fmt.Sprintf("%d. `%s` at %s: %s", n, r.ID, bd, escape(c.Reason)))
				fmt.Fprintf(&b, " %s [%d] |", c.Status, n)
			case "":
				b.WriteString(" (not run) |")
			default:
				fmt.Fprintf(&b, " %s |", c.Status)
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%d rows, %d cells: %d pass, %d fail, %d n/a, %d not exercised.\n",
		len(f.Rows), len(f.Rows)*len(Boundaries), counts[Pass], counts[Fail], counts[NotApplicable], counts[NotExercised])
	if len(notes) > 0 {
		b.WriteString("\n## Why a cell is not exercised\n\n")
		for _, n := range notes {
			b.WriteString(n + "\n")
		}
	}
	return b.Bytes()
}

// expects is the row's expectation in a few words for the page.
func (r Row) expects() string {
	if r.Waiting != "" || r.exercisedNowhere() {
		return "-"
	}
	e := r.Expect
	var parts []string
	status := e.Status
	if status == 0 && e.Shape != "identical" {
		status = 200
	}
	if status != 0 {
		parts = append(parts, fmt.Sprint(status))
	}
	switch {
	case e.Word != "":
		layer := e.Layer
		if layer == "" {
			layer = string(refusal.LayerGateway)
		}
		parts = append(parts, fmt.Sprintf("%s %d %s (%s)", e.Shape, e.Code, e.Word, layer))
	default:
		parts = append(parts, e.Shape)
	}
	switch a := e.Audit; {
	case a.None:
		parts = append(parts, "no record")
	case a.Unworded:
		parts = append(parts, "record without word")
	default:
		s := "record " + a.Outcome
		if a.Slot != "" {
			s += " at " + a.Slot
		}
		if a.Degraded != "" {
			s += ", degraded " + a.Degraded
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func escape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
