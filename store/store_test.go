package store

import (
	"reflect"
	"testing"
	"time"
)

func TestLastPerDayKeepsTheLaterOfADayAndReturnsABatchWithoutOneAsItIs(t *testing.T) {
	utc := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	east := time.FixedZone("", 2*3600)
	ds := []Day{
		{Schedule: "a", Day: utc, Data: []byte("1")},
		{Schedule: "b", Day: utc, Data: []byte("2")},
		{Schedule: "a", Day: utc.Add(23 * time.Hour).In(east), Data: []byte("3")}, // the same UTC day, the next day there
		{Schedule: "a", Day: utc.AddDate(0, 0, 1), Data: []byte("4")},
		{Schedule: "a", Day: utc, Instance: "other", Data: []byte("5")},
	}
	got := LastPerDay(ds)
	var data []string
	for _, d := range got {
		data = append(data, string(d.Data))
	}
	if want := []string{"2", "3", "4", "5"}; !reflect.DeepEqual(data, want) {
		t.Fatalf("kept %v, want %v", data, want)
	}
	if none := ds[1:4]; &LastPerDay(none)[0] != &none[0] {
		t.Fatal("a batch with no day twice was copied")
	}
}

func TestLastPerSlotKeepsTheLaterPageOfASlot(t *testing.T) {
	rs := []Round{{Schedule: "a", Slot: 1, Seq: 1}, {Schedule: "a", Slot: 2, Seq: 2}, {Schedule: "a", Slot: 1, Seq: 3}}
	got := LastPerSlot(rs)
	if len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 3 {
		t.Fatalf("kept %+v, want the pages of seq 2 and 3", got)
	}
}
