package matrix_test

// The wrap boundary: `aegis wrap` (the real binary) over a stdio child,
// this test binary in the child role. A row's lines go to wrap's stdin;
// what wrap writes, what the child received and wrap's audit file are
// checked. Each row is its own wrap process (its policy is its own).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/aegisbin"
	"github.com/aegis-gw/aegis/internal/matrix"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/wrap"
)

const (
	childRoleEnv = "AEGIS_MATRIX_CHILD"
	childLogEnv  = "AEGIS_MATRIX_CHILD_LOG"
)

// runChild is the stdio child: every chunk it reads is appended to the
// file $AEGIS_MATRIX_CHILD_LOG; each request line is answered, a result
// naming its method, or the child's own -32601 for no/such-method;
// notifications and lines that are not requests get nothing.
func runChild(string) int {
	log, err := os.OpenFile(os.Getenv(childLogEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer log.Close()
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			_, _ = log.Write(line)
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &req) == nil && len(req.ID) > 0 && req.Method != "" {
				m, _ := json.Marshal(req.Method)
				if req.Method == "no/such-method" {
					fmt.Fprintf(os.Stdout, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"child: no such method"}}`+"\n", req.ID, refusal.CodeMethodNotFound)
				} else {
					fmt.Fprintf(os.Stdout, `{"jsonrpc":"2.0","id":%s,"result":{"child":"answered","method":%s}}`+"\n", req.ID, m)
				}
			}
		}
		if err != nil {
			return 0
		}
	}
}

// wrapRun is one run: what came out on stdout, what the child received,
// the audit file's records.
type wrapRun struct {
	out, childGot []byte
	records       []wrap.Record
}

// runOnce runs the child under `aegis wrap` (wrapped) or directly, with
// input on its stdin.
func runOnce(t *testing.T, bin, policy string, input []byte, wrapped bool) (wrapRun, error) {
	dir := t.TempDir()
	childLog := filepath.Join(dir, "child.log")
	auditFile := filepath.Join(dir, "audit.jsonl")
	self, err := os.Executable()
	if err != nil {
		return wrapRun{}, err
	}
	argv := []string{self}
	if wrapped {
		args := []string{"wrap", "--audit", auditFile}
		if policy != "" {
			pf := filepath.Join(dir, "policy.yaml")
			if err := os.WriteFile(pf, []byte(policy), 0o600); err != nil {
				return wrapRun{}, err
			}
			args = append(args, "--policy", pf)
		}
		argv = append(append([]string{bin}, args...), append([]string{"--"}, argv...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), childRoleEnv+"=echo", childLogEnv+"="+childLog,
		wrap.EnvParamsKeyFile+"="+filepath.Join(dir, "params.key"),
		"GORACE=atexit_sleep_ms=0")
	cmd.Stdin = bytes.NewReader(input)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return wrapRun{}, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	r := wrapRun{out: out.Bytes()}
	if r.childGot, err = os.ReadFile(childLog); err != nil && !os.IsNotExist(err) {
		return r, err
	}
	if wrapped {
		b, err := os.ReadFile(auditFile)
		if err != nil {
			return r, err
		}
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var rec wrap.Record
			if err := json.Unmarshal(l, &rec); err != nil {
				return r, fmt.Errorf("audit line %q: %v", l, err)
			}
			r.records = append(r.records, rec)
		}
	}
	return r, nil
}

// runWrap runs the wrap rows.
func runWrap(t *testing.T, rows []matrix.Row, set func(string, matrix.Boundary, matrix.Cell)) {
	bin := aegisbin.Path(t)
	for _, r := range rows {
		t.Run(r.ID, func(t *testing.T) {
			errs := wrapRow(t, bin, r)
			for _, e := range errs {
				t.Error(e)
			}
			c := matrix.Cell{Status: matrix.Pass}
			if len(errs) > 0 {
				c = matrix.Cell{Status: matrix.Fail, Reason: strings.Join(errs, "; ")}
			}
			set(r.ID, matrix.Wrap, c)
		})
	}
}

func wrapRow(t *testing.T, bin string, r matrix.Row) []string {
	e := r.Expect
	input := []byte(strings.Join(r.Wrap.Send, "\n") + "\n")
	got, err := runOnce(t, bin, r.Wrap.Policy, input, true)
	if err != nil {
		return []string{err.Error()}
	}
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	switch e.Shape {
	case "identical":
		direct, err := runOnce(t, bin, "", input, false)
		if err != nil {
			return []string{err.Error()}
		}
		if !bytes.Equal(got.out, direct.out) {
			fail("wrap wrote %q, the child alone %q", got.out, direct.out)
		}
		if !bytes.Equal(got.childGot, input) {
			fail("the child received %q, want every byte sent: %q", got.childGot, input)
		}
	case "error":
		errs = append(errs, checkFrame(e, got.out, refusal.Seed)...)
		// Exactly one frame, naming the rule its record names (issue 29:
		// the tool and the rule a person can act on).
		var f struct {
			Error struct {
				Message string
				Data    struct{ Rule string }
			}
		}
		if bytes.Count(got.out, []byte("\n")) != 1 || json.Unmarshal(got.out, &f) != nil {
			fail("wrap wrote %q, want exactly one frame", got.out)
		} else if !strings.HasPrefix(f.Error.Message, refusal.WrapMessage) || !strings.HasSuffix(f.Error.Message, "("+e.Word+")") ||
			len(got.records) == 0 || f.Error.Data.Rule != got.records[len(got.records)-1].Rule {
			fail("wrap wrote %q: want its message to start %q and end with the word, and data.rule the record's rule", got.out, refusal.WrapMessage)
		}
		if bytes.Contains(got.out, []byte(fmt.Sprint(refusal.CodeMethodNotFound))) {
			fail("wrap answered %d", refusal.CodeMethodNotFound)
		}
	default:
		fail("shape %s is not a wrap shape", e.Shape)
	}
	if e.ChildSees == "none" && len(got.childGot) > 0 {
		fail("the child received %q, want nothing", got.childGot)
	}
	switch {
	case e.Audit.None:
		if len(got.records) > 0 {
			fail("want no audit record, wrap wrote %d: %+v", len(got.records), got.records)
		}
	case len(got.records) == 0:
		fail("want an audit record, wrap wrote none")
	default:
		// Every line that may be a tools/call has its record (a line that
		// is not JSON is recorded as one, rule unparseable); each must be
		// what the row expects.
		for _, w := range got.records {
			if err := w.Validate(); err != nil {
				fail("wrap's record does not validate: %v", err)
			}
			rec := audit.Record{Time: w.Time, Layer: w.Layer, Method: w.Method, Tool: w.Tool, ParamsHash: w.ParamsHash,
				Code: w.Code, Word: w.Word, Slot: w.Slot, Outcome: w.Outcome, PolicyHash: w.PolicyHash}
			errs = append(errs, checkRecord(e, rec, refusal.LayerWrap)...)
		}
	}
	return errs
}
