package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/registry"
)

// cmdPins is `aegis admin pins`: list a tenant's rug-pull pins (of tools,
// prompts, resources and resource templates) with what changed since each
// was made, pin a definition as its server lists it now (or a given
// hash), or drop a pin. diff, pin and unpin name one entry with exactly
// one of --tool, --prompt, --resource and --template.
//
//	aegis admin pins list  --tenant T [--server S]
//	aegis admin pins diff  --tenant T --server S --tool X
//	aegis admin pins pin   --tenant T --server S --prompt P [--hash H] [--by WHO]
//	aegis admin pins unpin --tenant T --server S --resource URI
//	aegis admin pins new-tools --tenant T [--set pin|hold]
func cmdPins(sub string, args []string) int {
	c := newCLI("pins " + sub)
	tenant := c.fs.String("tenant", "", "tenant (required)")
	server := c.fs.String("server", "", "server (required for diff, pin and unpin)")
	names := map[string]*string{
		registry.PinTool:     c.fs.String("tool", "", "a tool's name as its server lists it (diff, pin, unpin)"),
		registry.PinPrompt:   c.fs.String("prompt", "", "a prompt's name as its server lists it (diff, pin, unpin)"),
		registry.PinResource: c.fs.String("resource", "", "a resource's uri as its server lists it (diff, pin, unpin)"),
		registry.PinTemplate: c.fs.String("template", "", "a resource template's uriTemplate as its server lists it (diff, pin, unpin)"),
	}
	hash := c.fs.String("hash", "", "pin: this definition hash instead of the one listed now")
	by := c.fs.String("by", defaultBy(), "who (recorded with the admin principal)")
	set := c.fs.String("set", "", "new-tools: pin (trust on first use) or hold (new tools await a pin)")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *tenant == "" {
		return usageErr("pins %s: --tenant is required", sub)
	}
	kind, tool, named := "", "", 0
	for _, k := range registry.PinKinds {
		if v := *names[k]; v != "" {
			kind, tool = k, v
			named++
		}
	}
	if sub != "list" && sub != "new-tools" && (*server == "" || named != 1) {
		return usageErr("pins %s: --server and one of --tool, --prompt, --resource and --template are required", sub)
	}
	base := "/admin/v1/tenants/" + esc(*tenant)
	switch sub {
	case "list", "diff":
		path := base + "/pins"
		if *server != "" {
			path += "?" + url.Values{"server": {*server}}.Encode()
		}
		var out admin.PinList
		raw, err := c.do(http.MethodGet, path, nil, &out)
		if sub == "diff" {
			return c.finish(raw, err, func(w io.Writer) { pinDiff(w, out, *server, kind, tool) })
		}
		return c.finish(raw, err, func(w io.Writer) { pinTable(w, out) })
	case "new-tools":
		path := base + "/new-tools"
		var ans admin.NewToolsSetting
		var raw []byte
		var err error
		if *set == "" {
			raw, err = c.do(http.MethodGet, path, nil, &ans)
		} else {
			raw, err = c.do(http.MethodPut, path, admin.NewToolsSetting{NewTools: *set}, &ans)
		}
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintf(w, "tenant %s: new_tools %s\n", cell(*tenant), cell(ans.NewTools))
		})
	case "pin", "unpin":
		path := base + "/servers/" + esc(*server) + "/" + registry.PinKindPlural(kind) + "/" + esc(tool) + "/pin"
		method, body := http.MethodPost, any(admin.PinRequest{Hash: *hash, By: *by})
		if sub == "unpin" {
			method, body = http.MethodDelete, nil
		}
		var ans admin.PinAnswer
		raw, err := c.do(method, path, body, &ans)
		return c.finish(raw, err, func(w io.Writer) {
			what := registry.PinKindName(kind)
			if sub == "unpin" {
				fmt.Fprintf(w, "dropped the pin of %s %s on %s for tenant %s; the next listing pins it again\n", what, cell(tool), cell(*server), cell(*tenant))
				return
			}
			fmt.Fprintf(w, "pinned %s %s on %s for tenant %s at %s (by %s)\n", what, cell(ans.Pin.Tool), cell(ans.Pin.Server), cell(*tenant), cell(ans.Pin.Hash), cell(ans.Pin.By))
		})
	}
	return usageErr("pins: unknown subcommand %q", sub)
}

// pinDiff prints the pinned and the current definition of one entry.
func pinDiff(w io.Writer, out admin.PinList, server, kind, tool string) {
	for _, p := range append(out.Pins, out.Unpinned...) {
		if p.Server != server || p.Kind != kind || p.Tool != tool {
			continue
		}
		if p.RenamedFrom != "" {
			// A suspected rename: the pin to compare with is its old name's.
			for _, q := range out.Pins {
				if q.Server == server && q.Kind == registry.PinTool && q.Tool == p.RenamedFrom {
					fmt.Fprintf(w, "renamed from %s? (similarity %.2f)\n", cell(q.Tool), p.Similarity)
					p.Hash, p.Def = q.Hash, q.Def
				}
			}
		}
		fmt.Fprintf(w, "pinned  %s\n", or(cell(p.Hash), "(none)"))
		fmt.Fprintf(w, "  %s\n", or(cell(string(p.Def)), "-"))
		fmt.Fprintf(w, "current %s\n", or(cell(p.Current), "(not listed)"))
		if p.Changed || p.Hash == "" || p.RenamedFrom != "" {
			fmt.Fprintf(w, "  %s\n", or(cell(string(p.CurrentDef)), "-"))
		} else {
			fmt.Fprintln(w, "  (unchanged)")
		}
		return
	}
	fmt.Fprintf(w, "%s %s on %s: no pin and not listed\n", registry.PinKindName(kind), cell(tool), cell(server))
}

// pinTable prints a PinList: each pin, then, right under a pin whose tool
// its server no longer lists, the newcomer that looks like it renamed;
// then the other unpinned entries. KIND is tool, prompt, resource or
// template; NAME the entry's name (a uri, a uriTemplate).
func pinTable(w io.Writer, out admin.PinList) {
	fmt.Fprintf(w, "new tools: %s\n", cell(out.NewTools))
	fmt.Fprintln(w, "SERVER\tKIND\tNAME\tSTATE\tPINNED\tCURRENT\tBY\tAT")
	shown := map[[3]string]bool{}
	unpinned := func(p admin.PinView) {
		state := "unpinned"
		switch {
		case p.RenamedFrom != "":
			state = fmt.Sprintf("HELD: renamed from %s? (similarity %.2f)", cell(p.RenamedFrom), p.Similarity)
		case p.Held:
			state = "HELD for review"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(p.Server), registry.PinKindName(p.Kind), cell(p.Tool), state, "-", cell(p.Current), "-", "-")
		shown[[3]string{p.Server, p.Kind, p.Tool}] = true
	}
	for _, p := range out.Pins {
		state := "ok"
		switch {
		case !p.Listed && p.RenamedTo != "":
			state = "not listed: renamed to " + cell(p.RenamedTo) + "?"
		case !p.Listed:
			state = "not listed"
		case p.Changed:
			state = "CHANGED"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(p.Server), registry.PinKindName(p.Kind), cell(p.Tool), state, cell(p.Hash), or(cell(p.Current), "-"), cell(p.By), ts(p.At))
		if p.RenamedTo == "" {
			continue
		}
		for _, u := range out.Unpinned {
			if u.Server == p.Server && u.Kind == registry.PinTool && u.Tool == p.RenamedTo {
				unpinned(u)
			}
		}
	}
	for _, u := range out.Unpinned {
		if !shown[[3]string{u.Server, u.Kind, u.Tool}] {
			unpinned(u)
		}
	}
}
