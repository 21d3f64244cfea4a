package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/console"
)

// cmdConsole serves the web console on this machine for a deployed stack,
// whose admin routes use IAM authorization: a browser cannot sign SigV4,
// so this process does, with the operator's AWS credentials, and the
// browser logs in to it with a one-time key printed here
// (docs/console.md). With aegis serve the console needs none of this: it
// is on the gateway's own /admin/console/.
func cmdConsole(args []string) int {
	c := newCLI("console")
	addr := c.fs.String("addr", "127.0.0.1:8765", "loopback address to serve the console on")
	refresh := c.fs.Duration("kill-switch-refresh", 2*time.Second, "the stack's KILL_SWITCH_REFRESH_SECS, for when a stop is in force everywhere")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *c.url == defaultAdminURL {
		return usageErr("console: give --url, the deployed gateway's base URL (the stack's GatewayEndpoint output); with aegis serve open %s/admin/console/ instead", defaultAdminURL)
	}
	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return usageErr("console: --addr must be a loopback address (127.0.0.1:PORT): the console acts with your AWS credentials")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sig, err := newSigner(lctx, *c.url, true, *c.region)
	cancel()
	if err != nil {
		fmt.Fprintln(cliErr, "aegis admin console:", err)
		return 1
	}
	key := admin.NewKey()
	rm, err := console.NewRemote(&console.RemoteOptions{Target: *c.url, Sign: sig.sign, Key: key, KillSwitchRefresh: *refresh})
	if err != nil {
		fmt.Fprintln(cliErr, "aegis admin console:", err)
		return 1
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(cliErr, "aegis admin console:", err)
		return 1
	}
	fmt.Fprintf(cliOut, "console for %s on http://%s/admin/console/\nlog in with this one-time key (valid while this runs): %s\nCtrl-C to stop.\n", *c.url, ln.Addr(), key)
	srv := &http.Server{Handler: rm, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(cliErr, "aegis admin console:", err)
		return 1
	}
	return 0
}
