package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// The session item's own rate windows (session.Admitter):
//
//	wm N (the windows' minute, Unix seconds), ws N (the session window's
//	count), wt M (tool window name → count; at most session.MaxToolWindows)
//
// Admit is one UpdateItem in one of two shapes, each with the session's
// conditions (it exists, caller, both clocks) and
// ReturnValuesOnConditionCheckFailure ALL_OLD, which tells a lost
// condition apart: the session (gone, expired, foreign), a window at its
// limit, or the other shape's minute.
//
//   - same minute: wm = :m AND ws < limit AND (wt.tool < limit OR (a new
//     tool AND size(wt) < MaxToolWindows)); SET ws = ws + 1,
//     wt.tool = if_not_exists(wt.tool, 0) + 1, last_seen, ttl.
//   - new minute: wm absent or < :m; SET wm = :m, ws = 1, wt = {tool: 1},
//     last_seen, ttl: the earlier minute's windows are dropped in the same
//     write, so the map never holds more than one minute's tools.
//
// Which shape is tried first is guessed from the minute this process last
// saw the session's windows in (windowGuess; unknown: this minute, which
// Create stores for a new session); a wrong guess costs one lost
// conditional write and a round trip more.
// With w.Use (session.Window.Counts) the same write also counts the
// manifest counters (sessioncount.go): SET last_allowed, ADD tool_calls,
// ADD the step (on Count's steps bound), and returns the item as it was
// (ALL_OLD), whose counters the call is decided on.
// GiveBack is one UpdateItem (each part on the condition that it still
// holds: wm = :m AND count > 0; SET count - 1; last_allowed still the
// Admit's: restored, its step deleted); a lost part is nothing to give
// back.
const (
	attrWindowMinute = "wm"
	attrWindowCalls  = "ws"
	attrWindowTools  = "wt"
)

// windowGuess remembers, per session, the minute whose windows this
// process last saw stored: at most maxWindowGuesses sessions (emptied
// when full). It is a hint only.
type windowGuess struct {
	mu sync.Mutex
	m  map[string]int64
}

const maxWindowGuesses = 4096

func (g *windowGuess) get(k string) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.m[k]
	return m, ok
}

func (g *windowGuess) put(k string, minute int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil || len(g.m) >= maxWindowGuesses {
		g.m = make(map[string]int64)
	}
	g.m[k] = minute
}

// sessionClocks is the condition that the session exists, is caller's and
// is not expired under l at now, with its values, and the ttl a touch
// at now sets.
func (s *Store) sessionClocks(now time.Time, l session.Limits) (string, map[string]types.AttributeValue) {
	cond := "attribute_exists(pk)"
	vals := map[string]types.AttributeValue{":now": N(now.UnixNano())}
	ttl := now.Add(s.opt.SessionTTL)
	if l.Lifetime > 0 {
		cond += " AND created > :cmin"
		vals[":cmin"] = N(now.Add(-l.Lifetime).UnixNano())
		ttl = now.Add(l.Lifetime)
	}
	if l.Idle > 0 {
		cond += " AND last_seen > :imin"
		vals[":imin"] = N(now.Add(-l.Idle).UnixNano())
		ttl = now.Add(l.Idle)
	}
	vals[":ttl"] = TTL(ttl)
	return cond, vals
}

// Admit implements session.Admitter.
func (s *Store) Admit(ctx context.Context, tenant, id, caller string, now time.Time, l session.Limits, w session.Window) (session.Record, session.Admission, error) {
	guessKey := tenant + "\x00" + id
	// A session this process has not seen is guessed in this minute's
	// windows: a busy session's calls mostly are, and Create stores its
	// creation minute's.
	last, known := s.guess.get(guessKey)
	fresh := known && last != w.Start.Unix()
	write := w // what is written: w, less a step the steps' bound leaves out
	for range 3 {
		out, err := s.db.UpdateItem(ctx, s.admitInput(tenant, id, caller, now, l, write, fresh))
		if err == nil {
			// The item as it was: the record the call is decided on is it
			// with this write applied, its manifest counters as they were.
			before := sessionFromItem(out.Attributes)
			stored, _ := session.Admitted(before, now, write)
			s.guess.put(guessKey, write.Start.Unix())
			return session.Found(stored, before), session.Admission{}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return session.Record{}, session.Admission{}, mapErr("session Admit", err)
		}
		if len(ccf.Item) == 0 {
			return session.Record{}, session.Admission{}, store.ErrNotFound
		}
		r := sessionFromItem(ccf.Item)
		if r.Caller != caller || l.Expired(r, now) {
			return session.Record{}, session.Admission{}, store.ErrNotFound
		}
		if write.Use.Declared && len(r.Steps) >= session.MaxSteps && !slices.Contains(r.Steps, write.Use.Step) {
			// The steps are at their bound: the call is counted without
			// its step (Counted's rule), and the windows decide as ever.
			write.Use.Declared = false
		}
		stored := r.Windows.Start
		s.guess.put(guessKey, stored.Unix())
		switch {
		case stored.Before(write.Start):
			fresh = true
		case stored.After(write.Start): // another instance's clock is ahead: count in its minute
			write.Start, fresh = stored, false
		case !fresh:
			// This minute's windows, and one was at its limit (unless a
			// concurrent give-back freed it since, or it was the steps'
			// bound: then try again).
			if _, a := session.Admitted(r, now, write); !a.Counted() {
				return r, a, nil
			}
		default:
			fresh = false
		}
	}
	return session.Record{}, session.Admission{}, fmt.Errorf("dynamo session Admit: %w: the session's windows changed under three tries", store.ErrUnavailable)
}

// admitInput is Admit's UpdateItem in its fresh (new minute) or same
// minute shape, counting w.Use in the manifest counters when w.Counts
// (Count's update, in the same write).
func (s *Store) admitInput(tenant, id, caller string, now time.Time, l session.Limits, w session.Window, fresh bool) *dynamodb.UpdateItemInput {
	cond, vals := s.sessionClocks(now, l)
	cond += " AND caller = :caller"
	vals[":caller"] = S(caller)
	vals[":m"] = N(w.Start.Unix())
	names := map[string]string{"#ttl": AttrTTL}
	update := "SET last_seen = :now, #ttl = :ttl"
	if fresh {
		cond += " AND (attribute_not_exists(wm) OR wm < :m)"
		calls := int64(0)
		if w.PerSession > 0 {
			calls = 1
		}
		tools := map[string]types.AttributeValue{}
		if w.PerTool > 0 {
			tools[w.Tool] = N(1)
		}
		vals[":ws"], vals[":wt"] = N(calls), &types.AttributeValueMemberM{Value: tools}
		update += ", wm = :m, ws = :ws, wt = :wt"
	} else {
		cond += " AND wm = :m"
		vals[":one"] = N(1)
		if w.PerSession > 0 {
			cond += " AND ws < :ls"
			vals[":ls"] = N(w.PerSession)
			update += ", ws = ws + :one"
		}
		if w.PerTool > 0 {
			cond += " AND (wt.#t < :lt OR (attribute_not_exists(wt.#t) AND size(wt) < :cap))"
			vals[":lt"], vals[":cap"], vals[":zero"] = N(w.PerTool), N(session.MaxToolWindows), N(0)
			names["#t"] = w.Tool
			update += ", wt.#t = if_not_exists(wt.#t, :zero) + :one"
		}
	}
	if w.Counts() {
		vals[":at"] = N(w.Use.At.UnixNano())
		update += ", last_allowed = :at"
		var add []string
		if w.Use.ToolCall {
			vals[":call"] = N(1)
			add = append(add, "tool_calls :call")
		}
		if w.Use.Declared {
			n := strconv.FormatInt(w.Use.Step, 10)
			vals[":step"] = &types.AttributeValueMemberNS{Value: []string{n}}
			vals[":stepn"] = &types.AttributeValueMemberN{Value: n}
			vals[":maxsteps"] = N(session.MaxSteps)
			add = append(add, "steps :step")
			cond += " AND (attribute_not_exists(steps) OR size(steps) < :maxsteps OR contains(steps, :stepn))"
		}
		if len(add) > 0 {
			update += " ADD " + strings.Join(add, ", ")
		}
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.State),
		Key:                                 sessionKey(tenant, id),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// GiveBack implements session.Admitter: one UpdateItem of what
// session.ReturnOf finds to take back, each part on the condition that it
// still holds (the windows of w's minute above zero, ToolCalls above
// zero, LastAllowed still the Admit's own). When a part no longer holds,
// the item as it is (ALL_OLD) says what does, and that is written
// instead; a concurrent write can make that happen again, at most three
// times. A part that no longer holds is nothing to give back.
func (s *Store) GiveBack(ctx context.Context, tenant, id string, w session.Window, found session.Record) error {
	// The first guess: everything the Admit counted is still there.
	g := session.Return{Calls: w.PerSession > 0, Tool: w.PerTool > 0}
	if w.Counts() {
		g.ToolCalls, g.LastAllowed = w.Use.ToolCall, true
		g.Step = w.Use.Declared && !slices.Contains(found.Steps, w.Use.Step)
	}
	for range 3 {
		if !g.Any() {
			return nil
		}
		_, err := s.db.UpdateItem(ctx, giveBackInput(s.tables.State, sessionKey(tenant, id), w, found, g))
		if err == nil {
			return nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return mapErr("session GiveBack", err)
		}
		if len(ccf.Item) == 0 {
			return nil // the session is gone
		}
		g = session.ReturnOf(sessionFromItem(ccf.Item), w, found)
	}
	return fmt.Errorf("dynamo session GiveBack: %w: the session changed under three tries", store.ErrUnavailable)
}

// giveBackInput is GiveBack's UpdateItem of the parts g, each on the
// condition that it still holds.
func giveBackInput(table string, key Item, w session.Window, found session.Record, g session.Return) *dynamodb.UpdateItemInput {
	vals := map[string]types.AttributeValue{":one": N(1), ":zero": N(0)}
	var (
		names             map[string]string
		conds, sets, rest []string
	)
	if g.Calls || g.Tool {
		conds = append(conds, "wm = :m")
		vals[":m"] = N(w.Start.Unix())
	}
	if g.Calls {
		conds = append(conds, "ws > :zero")
		sets = append(sets, "ws = ws - :one")
	}
	if g.Tool {
		conds = append(conds, "wt.#t > :zero")
		names = map[string]string{"#t": w.Tool}
		sets = append(sets, "wt.#t = wt.#t - :one")
	}
	if g.ToolCalls {
		conds = append(conds, "tool_calls > :zero")
		sets = append(sets, "tool_calls = tool_calls - :one")
	}
	if g.LastAllowed {
		conds = append(conds, "last_allowed = :at")
		vals[":at"] = N(w.Use.At.UnixNano())
		if found.LastAllowed.IsZero() {
			rest = append(rest, "REMOVE last_allowed")
		} else {
			vals[":prev"] = N(found.LastAllowed.UnixNano())
			sets = append(sets, "last_allowed = :prev")
		}
	}
	if g.Step {
		vals[":step"] = &types.AttributeValueMemberNS{Value: []string{strconv.FormatInt(w.Use.Step, 10)}}
		rest = append(rest, "DELETE steps :step")
	}
	update := strings.Join(rest, " ")
	if len(sets) > 0 {
		update = strings.TrimSpace("SET " + strings.Join(sets, ", ") + " " + update)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(table),
		Key:                                 key,
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(strings.Join(conds, " AND ")),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// sessionWindows reads the windows attributes into r.
func sessionWindows(it Item, r *session.Record) {
	if _, ok := it[attrWindowMinute]; !ok {
		return
	}
	r.Windows.Start = time.Unix(GetN(it, attrWindowMinute), 0).UTC()
	r.Windows.Calls = GetN(it, attrWindowCalls)
	if t, ok := it[attrWindowTools].(*types.AttributeValueMemberM); ok && len(t.Value) > 0 {
		r.Windows.Tools = make(map[string]int64, len(t.Value))
		for k := range t.Value {
			r.Windows.Tools[k] = GetN(t.Value, k)
		}
	}
}

var _ session.Admitter = (*Store)(nil)
