package wrap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/aegis-gw/aegis/internal/syncbuf"
)

// TestTerminal: wrap run from a terminal, as a person debugging a server
// does. The child can read the terminal (before, in default mode it sat in
// a background process group and was stopped by SIGTTIN on its first
// read), and a ^C typed once reaches it exactly once: from the terminal
// when the child shares wrap's foreground group, from wrap when it has its
// own group.
func TestTerminal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"default", nil},
		{"policy", []string{"--policy", "POLICY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPty(t)
			args := wrapArgs(t, "wrap", tc.flags, childArgv(t, "ttychild"))
			cmd := exec.Command(self(t), args...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			var screen syncbuf.Buffer
			go func() { _, _ = io.Copy(&screen, master) }() // ends with EIO when the session is gone
			waitErr := make(chan error, 1)
			go func() { waitErr <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-waitErr
				master.Close()
			})

			ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
			if _, err := io.WriteString(master, ping+"\n"); err != nil {
				t.Fatal(err)
			}
			// The terminal echoes the line once; the child's answer is the second copy.
			waitFor(t, &screen, func(s string) bool { return strings.Count(s, ping) >= 2 }, "the child's echo of the line")
			if _, err := master.Write([]byte{3}); err != nil { // ^C
				t.Fatal(err)
			}
			select {
			case <-waitErr:
				waitErr <- nil
			case <-time.After(10 * time.Second):
				t.Fatalf("wrap did not exit after ^C; screen %q", screen.String())
			}
			if got := cmd.ProcessState.ExitCode(); got != 7 {
				t.Errorf("wrap exited %d, want the child's 7; screen %q", got, screen.String())
			}
			waitFor(t, &screen, func(s string) bool { return strings.Contains(s, "SIGINT") }, "SIGINT")
			if n := strings.Count(screen.String(), "SIGINT"); n != 1 {
				t.Errorf("the child got ^C %d times, want once; screen %q", n, screen.String())
			}
		})
	}
}

func init() {
	platformRoles["devtty"] = devTTY
}

// devTTY reads a line from /dev/tty, as ssh, sudo or gpg do for a
// password, and exits with status 5. It talks on stderr.
func devTTY([]string) int {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		fmt.Fprintln(os.Stderr, "devtty:", err)
		return 98
	}
	fmt.Fprintln(os.Stderr, "devtty ready")
	line, err := bufio.NewReader(tty).ReadString('\n')
	fmt.Fprintf(os.Stderr, "got:%s (%v)\n", strings.TrimSpace(line), err)
	return 5
}

// TestChildCanOpenTheTerminal: an MCP client started from a terminal
// starts wrap with pipes, not the terminal, as stdin and stdout. A child
// (or its child) that opens /dev/tty to ask for a password must be able
// to read it. Before, wrap put the child in a process group of its own,
// in the background of that terminal, so its read stopped it (SIGTTIN)
// and wrap waited for it forever.
func TestChildCanOpenTheTerminal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"default", nil},
		{"policy", []string{"--policy", "POLICY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPty(t)
			args := wrapArgs(t, "wrap", tc.flags, childArgv(t, "devtty"))
			inR, inW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer inW.Close()
			cmd := exec.Command(self(t), args...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, slave, slave
			// A session of its own with the terminal as its controlling
			// terminal, wrap leading the foreground group, as a shell
			// starts the MCP client that starts wrap.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 1}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			inR.Close()
			slave.Close()
			var screen syncbuf.Buffer
			go func() { _, _ = io.Copy(&screen, master) }()
			waitErr := make(chan error, 1)
			go func() { waitErr <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the session's group: wrap, and the child if it shares it
				_ = cmd.Process.Kill()
				<-waitErr
				master.Close()
			})
			waitFor(t, &screen, func(s string) bool { return strings.Contains(s, "devtty ready") }, "child ready")
			if _, err := io.WriteString(master, "hello\n"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-waitErr:
				waitErr <- nil
			case <-time.After(10 * time.Second):
				t.Fatalf("wrap did not exit: the child is stuck reading the terminal; screen %q; %s", screen.String(), childrenOf(cmd.Process.Pid))
			}
			if got := cmd.ProcessState.ExitCode(); got != 5 {
				t.Errorf("wrap exited %d, want the child's 5; screen %q", got, screen.String())
			}
			waitFor(t, &screen, func(s string) bool { return strings.Contains(s, "got:hello") }, "the line the child read")
		})
	}
}

// childrenOf describes pid's children: pid (comm) state ppid pgrp ...
func childrenOf(pid int) string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		st, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(st)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+1:]); len(f) > 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, s[:i+1]+" "+strings.Join(f[:3], " "))
		}
	}
	return "children of wrap (pid (comm) state ppid pgrp): " + strings.Join(out, "; ")
}

func waitFor(t *testing.T, b *syncbuf.Buffer, ok func(string) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok(b.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s on the terminal; screen %q", what, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openPty opens a new pseudo-terminal pair.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
