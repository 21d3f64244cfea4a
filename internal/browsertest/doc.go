// Package browsertest drives the operators' console (shared/console) in a
// real browser: Debian's chromium, headless, through chromedp. Its test
// builds the aegis binary, starts `aegis serve --demo` with an admin key on
// a loopback port, acts as the demo agent with the official MCP Go SDK's
// client, and checks in the page what an operator does: log in, approve a
// held call, stop a tool, read the audit trail, and that every control has
// a label and the approval form is used in a sensible order from the
// keyboard. It writes a screenshot of every page (docs/console.md).
//
// A missing chromium fails the test, naming it; scripts/test installs it
// with apt-get where it can.
package browsertest
