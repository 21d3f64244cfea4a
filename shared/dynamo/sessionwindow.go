package dynamo

import (
	"context"
	"errors"
	"fmt"
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
// GiveBack is one UpdateItem (wm = :m AND each count > 0; SET count - 1);
// a lost condition is nothing to give back.
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
	for range 3 {
		out, err := s.db.UpdateItem(ctx, s.admitInput(tenant, id, caller, now, l, w, fresh))
		if err == nil {
			r := sessionFromItem(out.Attributes)
			s.guess.put(guessKey, w.Start.Unix())
			return r, session.Admission{}, nil
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
		stored := r.Windows.Start
		s.guess.put(guessKey, stored.Unix())
		switch {
		case stored.Before(w.Start):
			fresh = true
		case stored.After(w.Start): // another instance's clock is ahead: count in its minute
			w.Start, fresh = stored, false
		case !fresh:
			// This minute's windows, and one was at its limit (unless a
			// concurrent give-back freed it since: then try again).
			if _, a := session.Admitted(r, now, w); !a.Counted() {
				return r, a, nil
			}
		default:
			fresh = false
		}
	}
	return session.Record{}, session.Admission{}, fmt.Errorf("dynamo session Admit: %w: the session's windows changed under three tries", store.ErrUnavailable)
}

// admitInput is Admit's UpdateItem in its fresh (new minute) or same
// minute shape.
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
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.State),
		Key:                                 sessionKey(tenant, id),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// GiveBack implements session.Admitter.
func (s *Store) GiveBack(ctx context.Context, tenant, id string, w session.Window) error {
	if !w.On() {
		return nil
	}
	cond := "wm = :m"
	vals := map[string]types.AttributeValue{":m": N(w.Start.Unix()), ":one": N(1), ":zero": N(0)}
	var names map[string]string
	var sets []string
	if w.PerSession > 0 {
		cond += " AND ws > :zero"
		sets = append(sets, "ws = ws - :one")
	}
	if w.PerTool > 0 {
		cond += " AND wt.#t > :zero"
		names = map[string]string{"#t": w.Tool}
		sets = append(sets, "wt.#t = wt.#t - :one")
	}
	update := "SET " + sets[0]
	for _, x := range sets[1:] {
		update += ", " + x
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.State),
		Key:                       sessionKey(tenant, id),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	if err = mapErr("session GiveBack", err); isConflict(err) {
		return nil // nothing of this minute to give back
	}
	return err
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
