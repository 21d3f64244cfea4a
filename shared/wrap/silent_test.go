package wrap

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// Hostile children of issue 35, item 5: a refused call gets its frame
// whatever the child does.

// fragment is what the fragdie child writes without a newline.
const fragment = `{"jsonrpc":"2.0","id":"frag","result":{"half":`

func init() {
	platformRoles["fragdie"] = fragDie
	platformRoles["closedstdin"] = closedStdin
}

// fragDie writes fragment and, at the first line it reads, kills itself
// (SIGKILL): a child that dies mid-line.
func fragDie([]string) int {
	if _, err := os.Stdout.WriteString(fragment); err != nil {
		return 98
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 97
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Hour)
	return 0
}

// closedStdin closes its stdin, says so with its pid in a notification
// line, and runs until it is signalled.
func closedStdin([]string) int {
	if err := os.Stdin.Close(); err != nil {
		return 98
	}
	fmt.Printf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"pid":%d}}`+"\n", os.Getpid())
	time.Sleep(time.Hour)
	return 0
}

func wantFrame(id string) string {
	return frame(id, string(refusal.PolicyDenied), "write_file", "deny:write_file")
}

// TestFrameAfterAChildThatDiesMidLine: the child writes half a line, a
// refused call's frame is held for the line's end, and the child dies:
// the client gets the fragment ended by a newline, then the frame on its
// own line (it used to be glued onto the fragment, unparseable).
func TestFrameAfterAChildThatDiesMidLine(t *testing.T) {
	l := startLive(t, []string{"--policy", writeFile(t, "p.yaml", "deny: [write_file]\n"), "--", self(t), roleFlag + "fragdie"})
	got := make([]byte, len(fragment))
	if _, err := io.ReadFull(l.out, got); err != nil || string(got) != fragment {
		t.Fatalf("read %q, %v; want the child's fragment", got, err)
	}
	l.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"write_file","arguments":{}}}` + "\n")
	l.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n") // the child reads it and dies
	rest, err := io.ReadAll(l.out)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\n" + wantFrame("5"); string(rest) != want {
		t.Errorf("after the fragment wrap wrote %q, want %q", rest, want)
	}
	if code := l.wait(); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d, want %d", code, 128+int(syscall.SIGKILL))
	}
}

// TestFramesWhileTheChildsStdinIsClosed: the child closes its stdin and
// keeps running. A call forwarded to it is lost (as it would be without
// wrap), and wrap keeps reading the client: every refused call after it
// still gets its frame (wrap used to stop reading at the failed write).
func TestFramesWhileTheChildsStdinIsClosed(t *testing.T) {
	l := startLive(t, []string{"--policy", writeFile(t, "p.yaml", "deny: [write_file]\n"), "--", self(t), roleFlag + "closedstdin"})
	var hello struct {
		Params struct{ Pid int } `json:"params"`
	}
	if line := l.recv(); json.Unmarshal([]byte(line), &hello) != nil || hello.Params.Pid == 0 {
		t.Fatalf("child said %q", line)
	}
	kill := func() { _ = syscall.Kill(hello.Params.Pid, syscall.SIGTERM) }
	defer kill()
	guard := time.AfterFunc(20*time.Second, kill) // a hung wrap fails the test, not the suite
	defer guard.Stop()
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"x":"` + strings.Repeat("x", 256<<10) + `"}}}`
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
		big, // more than a pipe holds: the write fails, it does not block
	}
	for i := 3; i < 6; i++ {
		lines = append(lines, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"tools/call","params":{"name":"write_file","arguments":{}}}`)
	}
	go func() { // a wrap that stopped reading must not hang the test
		_, _ = io.WriteString(l.in, strings.Join(lines, "\n")+"\n")
	}()
	for i := 3; i < 6; i++ {
		if got, want := l.recv(), wantFrame(strconv.Itoa(i)); got != want {
			t.Fatalf("call %d: got %q, want %q", i, got, want)
		}
	}
	kill()
	if code := l.wait(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
}

// TestHeldFramesAreBounded: frames held behind the child's unfinished
// line are bounded; past the bound the writer of frames waits, and every
// frame is written, in order, once the child ends its line.
func TestHeldFramesAreBounded(t *testing.T) {
	var b syncbuf.Buffer
	o := &clientOut{w: &b}
	o.child([]byte(`{"partial`))
	frame := []byte(strings.Repeat("f", 1023) + "\n")
	n := maxPendingFrames/len(frame) + 10
	done := make(chan struct{})
	go func() {
		for range n {
			o.frame(frame)
		}
		close(done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o.mu.Lock()
		held := len(o.pending)
		o.mu.Unlock()
		if held >= maxPendingFrames {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes held, want the bound %d reached", held, maxPendingFrames)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("every frame was held: the bound did not stop the writer")
	case <-time.After(50 * time.Millisecond):
	}
	o.mu.Lock()
	if held := len(o.pending); held > maxPendingFrames {
		t.Errorf("%d bytes held, over the bound %d", held, maxPendingFrames)
	}
	o.mu.Unlock()
	o.child([]byte("}\n"))
	<-done
	if want := `{"partial}` + "\n" + strings.Repeat(string(frame), n); b.String() != want {
		t.Errorf("wrote %d bytes, want %d: the fragment's end, then every frame", len(b.String()), len(want))
	}
}
