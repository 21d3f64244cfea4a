package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// NewHTTPClient is the transport for upstream calls: pooled keep-alive
// connections, no redirects followed (a 3xx is an upstream error), and every
// dialed address checked by netguard.Control (no link-local or metadata
// addresses; loopback only in local mode). It uses no proxy: HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY are ignored, because through a proxy the dial
// check would see only the proxy's address and the proxy would connect to
// whatever the upstream URL names (docs/upstream.md).
func NewHTTPClient(local bool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.Control(local)}).DialContext
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// lister fetches one of a server's lists (tools/list, prompts/list,
// resources/list or resources/templates/list: method, the array in the
// result: member, each entry's name: key) over a fresh upstream session
// announcing the capability set it lists for (route.Lister), which it
// ends afterwards. A server that answers the method with -32601
// (it has no prompts, say) has an empty list.
type lister struct {
	up                  *upstream.Client
	method, member, key string
}

// The lists of the catalogs (route.Catalogs).
func toolLister(up *upstream.Client) lister { return lister{up, "tools/list", "tools", "name"} }
func promptLister(up *upstream.Client) lister {
	return lister{up, "prompts/list", "prompts", "name"}
}
func resourceLister(up *upstream.Client) lister {
	return lister{up, "resources/list", "resources", "uri"}
}
func templateLister(up *upstream.Client) lister {
	return lister{up, "resources/templates/list", "resourceTemplates", "uriTemplate"}
}

// maxPages bounds list pagination.
const maxPages = 20

// ListTools implements route.Lister (for every kind of list).
func (l lister) ListTools(ctx context.Context, srv *registry.Server, caps upstream.Caps) ([]route.Tool, error) {
	ctx = l.up.WithBudget(ctx) // one UPSTREAM_TIMEOUT_SECS for every page
	sess, err := l.up.Open(ctx, srv, caps.JSON())
	if err != nil {
		return nil, err
	}
	// The listing session is ours alone: end it once the list is read, so
	// that catalog refreshes do not pile up sessions at the upstream.
	defer func() { _ = l.up.End(context.WithoutCancel(ctx), srv, sess) }()
	var tools []route.Tool
	var cursor string
	for page := 0; page < maxPages; page++ {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			c, _ := json.Marshal(cursor)
			params = jsonrpc.Edit(params, "cursor", c)
		}
		resp, _, err := l.up.Send(ctx, &upstream.Exchange{Server: srv, Session: sess, ID: json.RawMessage(fmt.Sprint(page + 1)), Method: l.method, Params: params, Capabilities: caps.JSON()})
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			if l.method != "tools/list" && errorCode(resp.Error) == jsonrpc.CodeMethodNotFound {
				return []route.Tool{}, nil
			}
			return nil, &upstream.ProtocolError{Detail: l.method + " failed: " + string(resp.Error)}
		}
		var res struct {
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return nil, &upstream.ProtocolError{Detail: l.method + " result unreadable"}
		}
		jsonrpc.Elements(jsonrpc.Member(resp.Result, l.member), func(def json.RawMessage) {
			if name, ok := jsonrpc.StringMember(def, l.key); ok && name != "" {
				tools = append(tools, route.Tool{Name: name, Def: def})
			}
		})
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	return tools, nil
}

// errorCode is a JSON-RPC error object's code (0 when unreadable).
func errorCode(errObj json.RawMessage) int64 {
	var e struct {
		Code int64 `json:"code"`
	}
	_ = json.Unmarshal(errObj, &e)
	return e.Code
}
