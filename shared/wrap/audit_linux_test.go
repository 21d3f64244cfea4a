package wrap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/aegis-gw/aegis/internal/syncbuf"
)

func init() {
	platformRoles["fsize-wrap"] = fsizeWrap
	platformRoles["fsize-audit"] = fsizeAudit
}

// limitFileSize makes this process's writes past limit bytes of any file
// fail with EFBIG, as a full disk fails them with ENOSPC: a write(2) that
// crosses the limit writes up to it and the next one fails. SIGXFSZ,
// which would kill the process, is ignored.
func limitFileSize(limit uint64) error {
	signal.Ignore(syscall.SIGXFSZ)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		return err
	}
	rl.Cur = limit
	return syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rl)
}

// fsizeWrap is wrap (args[1:]) with writes limited to args[0] bytes per
// file until the test raises the limit with prlimit(2).
func fsizeWrap(args []string) int {
	limit, _ := strconv.ParseUint(args[0], 10, 64)
	if err := limitFileSize(limit); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 98
	}
	return Run(args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// fsizeAudit commits three records to the audit file args[0], the first
// one under a 100-byte file size limit, with a truncate that fails when
// args[1] is "truncate-fails". It prints each commit's error.
func fsizeAudit(args []string) int {
	a, err := openAudit(args[0], false)
	if err != nil {
		fmt.Println(err)
		return 98
	}
	a.warn = func(msg string) { fmt.Println("warn:", msg) }
	if args[1] == "truncate-fails" {
		a.truncate = func(*os.File, int64) error { return syscall.EIO }
	}
	if err := limitFileSize(100); err != nil {
		fmt.Println(err)
		return 97
	}
	rec := func(tool string) []Record {
		return []Record{{Tool: tool, ID: json.RawMessage(`1`), Outcome: "allowed", ParamsHash: argsHash(""), PolicyHash: emptyPolicy.Hash()}}
	}
	_, err = a.commit(rec("first"))
	fmt.Println("first:", err)
	if err := limitFileSize(^uint64(0)); err != nil { // RLIM_INFINITY
		fmt.Println(err)
		return 96
	}
	for _, tool := range []string{"second", "third"} {
		_, err := a.commit(rec(tool))
		fmt.Printf("%s: %v\n", tool, err)
	}
	if err := a.close(); err != nil {
		fmt.Println(err)
		return 95
	}
	return 0
}

// TestAuditShortWriteLeavesNoTornRecord: a record that only partly fits
// in the file (disk full, file size limit) is cut off again, so the next
// record is not glued onto the fragment. Before, the file read
// `{"time":…,"tool":"echo"{"time":…}` and no reader could parse either.
func TestAuditShortWriteLeavesNoTornRecord(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	args := append([]string{roleFlag + "fsize-wrap", "100", "--audit", audit, "--"}, childArgv(t, "mirror", "")...)
	cmd := exec.Command(self(t), args...)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	var errb syncbuf.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out := bufio.NewReader(outp)
	io.WriteString(in, callLine(1, "echo"))
	if got, err := out.ReadString('\n'); err != nil || got != frame("1", "INTERNAL_ERROR", "echo", ruleAuditFailed) {
		t.Fatalf("got %q, %v; stderr %s", got, err, errb.String())
	}
	// Lift the limit (the hard limit stays what it was).
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = rl.Max
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(cmd.Process.Pid), syscall.RLIMIT_FSIZE, uintptr(unsafe.Pointer(&rl)), 0, 0, 0); e != 0 {
		t.Fatal(e)
	}
	io.WriteString(in, callLine(2, "echo"))
	if got, err := out.ReadString('\n'); err != nil || got != callLine(2, "echo") {
		t.Fatalf("got %q, %v; stderr %s", got, err, errb.String())
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v; stderr %s", err, errb.String())
	}
	if w := errb.String(); !strings.Contains(w, "file too large") || !strings.Contains(w, "NOT recorded") {
		t.Errorf("stderr %q should give the cause and say the refusal is not recorded", w)
	}
	recs := readRecords(t, audit) // fails on a torn line
	if len(recs) != 1 || string(recs[0].ID) != "2" || recs[0].Outcome != "allowed" || recs[0].Seq != 1 {
		t.Errorf("records %+v, want only call 2's, seq 1", recs)
	}
}

// TestAuditTornRecordStaysOnItsOwnLine: when the fragment of a short write
// cannot be cut off, it is said so, and the next record starts on a new
// line: the fragment is one bad line, every later record a whole one.
func TestAuditTornRecordStaysOnItsOwnLine(t *testing.T) {
	for _, mode := range []string{"truncate-works", "truncate-fails"} {
		t.Run(mode, func(t *testing.T) {
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			out, err := exec.Command(self(t), roleFlag+"fsize-audit", audit, mode).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !strings.Contains(string(out), "first: write "+audit+": file too large") ||
				!strings.Contains(string(out), "second: <nil>") || !strings.Contains(string(out), "third: <nil>") {
				t.Fatalf("commits: %s", out)
			}
			b, err := os.ReadFile(audit)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.SplitAfter(b, []byte("\n"))
			if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
				lines = lines[:len(lines)-1]
			}
			wantSeq := uint64(1) // the cut-off record gave its number back
			if mode == "truncate-fails" {
				if len(lines) != 3 || len(lines[0]) != 101 || !json.Valid(lines[1]) {
					t.Fatalf("file %q: want the 100-byte fragment on a line of its own, then two records", b)
				}
				if !strings.Contains(string(out), "warn:") || !strings.Contains(string(out), "input/output error") {
					t.Errorf("no warning about the fragment: %s", out)
				}
				lines, wantSeq = lines[1:], 2
			}
			if len(lines) != 2 {
				t.Fatalf("file %q: want two records", b)
			}
			for i, l := range lines {
				var r Record
				if err := json.Unmarshal(l, &r); err != nil || l[len(l)-1] != '\n' {
					t.Fatalf("line %q: %v", l, err)
				}
				if want := []string{"second", "third"}[i]; r.Tool != want || r.Seq != wantSeq+uint64(i) {
					t.Errorf("record %d: tool %q seq %d, want %q seq %d", i, r.Tool, r.Seq, want, wantSeq+uint64(i))
				}
			}
		})
	}
}
