package memstore

import (
	"context"
	"sort"

	"github.com/aegis-gw/aegis/shared/killswitch"
)

type stopKey struct{ tenant, server, tool string }

// PutStop implements killswitch.Store.
func (s *Store) PutStop(_ context.Context, st killswitch.Stop) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stops == nil {
		s.stops = map[stopKey]killswitch.Stop{}
	}
	s.stops[stopKey{st.Tenant, st.Server, st.Tool}] = st
	return nil
}

// DeleteStop implements killswitch.Store.
func (s *Store) DeleteStop(_ context.Context, tenant, server, tool string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stops, stopKey{tenant, server, tool})
	return nil
}

// Stops implements killswitch.Reader; sorted by server, then tool.
func (s *Store) Stops(_ context.Context, tenant string) ([]killswitch.Stop, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []killswitch.Stop
	for k, st := range s.stops {
		if k.tenant == tenant {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Tool < out[j].Tool
	})
	return out, nil
}

var _ killswitch.Store = (*Store)(nil)
