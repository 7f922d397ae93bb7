package statistics

import (
	"time"

	"github.com/fom-go/fom/store"
)

func storeBatch(schedule string, d time.Time, data []byte) store.StatsBatch {
	return store.StatsBatch{Days: []store.Day{{Schedule: schedule, Day: d, Data: data}}}
}
