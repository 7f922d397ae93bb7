package postgres

import (
	"github.com/fom-go/fom/cluster"
	"github.com/fom-go/fom/cluster/pgcluster"
)

// Coordinate builds an App's part in the cluster on this store (package
// pgcluster): it listens on the store's channel, and the store records the
// App's writes under its instance. An App finds it by this method, so
// that an App on another store links none of the cluster.
func (s *Store) Coordinate(o cluster.Options) (cluster.Coordinator, error) {
	o.Channel = s.Channel()
	c, err := pgcluster.New(s.Pool(), s.Schema(), o)
	if err != nil {
		return nil, err
	}
	if err := s.BindInstance(c.ID()); err != nil {
		return nil, err
	}
	return c, nil
}
