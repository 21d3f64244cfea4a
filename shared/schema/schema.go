// Package schema is the first check of the pipeline's "content" slot:
// INPUT_VALIDATION. It validates a tools/call's arguments against the
// inputSchema of the called tool's definition (the one the route stage
// resolved, as the tool's server lists it) with
// github.com/santhosh-tekuri/jsonschema/v6, and in Block mode refuses a call
// that fails it with -32602, error.data carrying the JSON pointer and the
// keyword of the first violation (refusal.Schema); in Monitor mode it logs
// the same at WARN and lets the call on. Either way the call's audit record
// gets a finding of kind FindingKind. INPUT_VALIDATION=off builds no
// check.
//
// The contract:
//   - Absent or null arguments are validated as {}. A definition without an
//     inputSchema is not validated.
//   - Each schema is compiled once per Hash (SHA-256 of its bytes) and kept
//     in a Cache bounded by count and bytes (DefaultMaxEntries,
//     DefaultMaxBytes), oldest evicted first.
//   - Nothing is fetched: a $ref (or $schema) naming any resource other than
//     the schema itself and the JSON Schema meta-schemas (embedded in the
//     library) makes the schema fail to compile. file: URLs included.
//   - A schema without $schema is read as draft 2020-12 (MCP's default).
//     format is an annotation there, as the draft says; patterns are Go
//     (RE2) regular expressions, so an ECMA-only construct (lookaround,
//     backreference) does not compile.
//   - A schema that does not compile (or is larger than the cache's byte
//     cap) is not validated: its calls go on, and it is logged once at WARN
//     while its entry is cached. The upstream published it, the gateway
//     cannot read it; refusing every call to the tool would turn a gateway
//     limitation into an outage (docs/design/schema.md).
//   - Neither the refusal nor the log echoes the caller's data: the pointer
//     keeps array indices and the property names the schema itself
//     declares; any other member name is written "*".
//
// It needs no store, so it never fails to decide; an error it returns is an
// internal one, and its stage fails closed.
package schema

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// Mode is what the check does with arguments that fail their schema.
type Mode uint8

// The modes of INPUT_VALIDATION that build a check ("off" builds none).
// The zero value is Block.
const (
	Block   Mode = iota // refuse with -32602
	Monitor             // log at WARN and let the call on
)

// Options configure New. The zero value is ready to use.
type Options struct {
	Logger *slog.Logger // nil: slog.Default()
	// Cache holds the compiled schemas; nil: a new
	// NewCache(DefaultMaxEntries, DefaultMaxBytes).
	Cache *Cache
}

// FindingKind is the audit finding's kind for arguments that fail their
// tool's inputSchema; its rule is the failing keyword ("required",
// "type", ...). The pointer is in the refusal's data (block) and the log
// (monitor), not in the record.
const FindingKind = "schema"

// Check is the INPUT_VALIDATION check. It is safe for concurrent use.
type Check struct {
	mode  Mode
	log   *slog.Logger
	cache *Cache
}

// New returns the check for mode. An unknown mode is Block.
func New(mode Mode, o *Options) *Check {
	k := &Check{mode: mode, log: slog.Default()}
	if o != nil {
		if o.Logger != nil {
			k.log = o.Logger
		}
		k.cache = o.Cache
	}
	if k.cache == nil {
		k.cache = NewCache(0, 0)
	}
	if k.mode != Monitor {
		k.mode = Block
	}
	return k
}

// Check implements pipeline.Check.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	raw := jsonrpc.Member(c.ToolDef, "inputSchema")
	if raw == nil {
		return nil
	}
	e, inserted := k.cache.get(raw)
	if e.err != nil {
		if inserted {
			k.log.WarnContext(ctx, "tool inputSchema does not compile; calls to the tool are not validated",
				append(k.attrs(c), "schema_hash", hex.EncodeToString(e.hash[:8]), "err", e.err)...)
		}
		return nil
	}
	args := jsonrpc.Member(c.Params, "arguments")
	if args == nil || string(args) == "null" {
		args = emptyObject
	}
	var v any
	var err error
	if string(bytes.TrimSpace(args)) == "{}" {
		// No arguments, the usual case of a tool that takes none: no
		// decoder for two bytes.
		v = map[string]any{}
	} else {
		v, err = jsonschema.UnmarshalJSON(bytes.NewReader(args))
	}
	if err != nil {
		// The JSON-RPC decoder and the params stage read these bytes
		// already: this cannot happen, and it must not let the call on.
		return fmt.Errorf("schema: arguments unreadable: %w", err)
	}
	err = e.sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("schema: validate: %w", err)
	}
	pointer, keyword := first(ve, v, e.names)
	if k.mode == Monitor {
		c.Found(audit.Finding{At: audit.AtArguments, Kind: FindingKind, Rule: keyword, Action: audit.ActionLogged})
		k.log.WarnContext(ctx, "arguments fail the tool's inputSchema (INPUT_VALIDATION=monitor: let through)",
			append(k.attrs(c), "pointer", pointer, "keyword", keyword)...)
		return nil
	}
	c.Found(audit.Finding{At: audit.AtArguments, Kind: FindingKind, Rule: keyword, Action: audit.ActionBlocked})
	return refusal.Schema(pointer, keyword)
}

func (k *Check) attrs(c *pipeline.Call) []any {
	server := ""
	if c.Server != nil {
		server = c.Server.Name
	}
	return []any{"correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", server, "tool", c.UpstreamTool}
}

var emptyObject = []byte("{}")

// base is the URL a schema is compiled under. Nothing is ever loaded from
// it (refuse answers every load); a relative $ref resolves against it and
// is refused in turn.
const base = "https://aegis.invalid/input-schema.json"

// errTooLarge is the entry of a schema over the cache's byte cap.
var errTooLarge = errors.New("inputSchema larger than the schema cache's byte cap")

// refuse is the compiler's URL loader: no $ref is ever fetched, from the
// network or from the file system.
type refuse struct{}

func (refuse) Load(url string) (any, error) {
	return nil, fmt.Errorf("not loaded: aegis fetches no schema resources (%s)", url)
}

// compile compiles one inputSchema. The entry's err says why it did not.
func compile(raw []byte) *compiled {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &compiled{err: err}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuse{})
	if err := c.AddResource(base, doc); err != nil {
		return &compiled{err: err}
	}
	sch, err := c.Compile(base)
	if err != nil {
		return &compiled{err: err}
	}
	return &compiled{sch: sch, names: declaredNames(doc)}
}

var _ pipeline.Check = (*Check)(nil)
