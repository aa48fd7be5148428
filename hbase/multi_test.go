package hbase

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// TestMultiCodec checks the hand-written Multi encoding against the
// generated protobuf code: the request appendMulti writes must parse as
// the MultiRequest the generated structs describe, and multiResults must
// report what a MultiResponse built with them says (region and action
// exceptions, indexes, results and fields it skips), and refuse bytes cut
// short.
func TestMultiCodec(t *testing.T) {
	r1 := &Region{Name: []byte("t,,1.abc.")}
	r2 := &Region{Name: []byte("t,m,2.def.")}
	muts := []*mutation{
		{row: []byte("a"), n: 3},
		{row: []byte("b"), n: 1, del: true},
		{row: make([]byte, 300), n: 200}, // lengths past one varint byte
	}
	batch := []*regionBatch{{region: r1, muts: muts[:2]}, {region: r2, muts: muts[2:]}}
	got := &pb.MultiRequest{}
	if err := proto.Unmarshal(appendMulti(nil, batch), got); err != nil {
		t.Fatal(err)
	}
	want := &pb.MultiRequest{}
	for _, rb := range batch {
		ra := &pb.RegionAction{Region: &pb.RegionSpecifier{Type: pb.RegionSpecifier_REGION_NAME.Enum(), Value: rb.region.Name}}
		for i, m := range rb.muts {
			typ := pb.MutationProto_PUT
			if m.del {
				typ = pb.MutationProto_DELETE
			}
			ra.Action = append(ra.Action, &pb.Action{Index: proto.Uint32(uint32(i)), Mutation: &pb.MutationProto{Row: m.row, MutateType: typ.Enum(), AssociatedCellCount: proto.Int32(int32(m.n))}})
		}
		want.RegionAction = append(want.RegionAction, ra)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("appendMulti encodes\n%v\nwant\n%v", got, want)
	}
	if n := len(appendMulti(nil, batch)); n != bytesFieldLen(fMultiRegionAction, regionActionLen(batch[0]))+bytesFieldLen(fMultiRegionAction, regionActionLen(batch[1])) {
		t.Fatalf("appendMulti wrote %d bytes, its sizes say otherwise", n)
	}

	exc := func(s string) *pb.NameBytesPair {
		return &pb.NameBytesPair{Name: proto.String("org.apache.hadoop.hbase." + s), Value: []byte(s + " at ...")}
	}
	resp := &pb.MultiResponse{
		RegionActionResult: []*pb.RegionActionResult{
			{ResultOrException: []*pb.ResultOrException{
				{Index: proto.Uint32(1), Result: &pb.Result{}},
				{Index: proto.Uint32(0), Exception: exc("RegionTooBusyException")},
				{Result: &pb.Result{AssociatedCellCount: proto.Int32(0)}}, // no index: 0
			}},
			{Exception: exc("NotServingRegionException")},
			{ResultOrException: []*pb.ResultOrException{{Index: proto.Uint32(300)}}},
		},
		Processed: proto.Bool(true),
	}
	enc, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	err = multiResults(enc, func(i int, e *pb.NameBytesPair) {
		seen = append(seen, fmt.Sprintf("region %d exc=%v", i, e.GetName()))
	}, func(i int, index uint32, e *pb.NameBytesPair) {
		seen = append(seen, fmt.Sprintf("action %d/%d exc=%v", i, index, e.GetName()))
	})
	if err != nil {
		t.Fatal(err)
	}
	var wantSeen []string
	for i, rr := range resp.RegionActionResult {
		wantSeen = append(wantSeen, fmt.Sprintf("region %d exc=%v", i, rr.GetException().GetName()))
		if rr.Exception != nil {
			continue
		}
		for _, roe := range rr.ResultOrException {
			wantSeen = append(wantSeen, fmt.Sprintf("action %d/%d exc=%v", i, roe.GetIndex(), roe.GetException().GetName()))
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(wantSeen) {
		t.Fatalf("multiResults reports\n%q\nwant\n%q", seen, wantSeen)
	}
	for cut := 1; cut < len(enc); cut++ {
		// Every prefix either parses as fewer whole fields or is refused;
		// a cut inside a length-delimited field must be refused.
		err := multiResults(enc[:cut], func(int, *pb.NameBytesPair) {}, func(int, uint32, *pb.NameBytesPair) {})
		if err != nil && !errors.Is(err, rpc.ErrCorrupt) {
			t.Fatalf("cut at %d: %v does not wrap rpc.ErrCorrupt", cut, err)
		}
	}
	if err := multiResults(enc[:3], func(int, *pb.NameBytesPair) {}, func(int, uint32, *pb.NameBytesPair) {}); !errors.Is(err, rpc.ErrCorrupt) {
		t.Fatalf("a response cut inside its first region result: %v, want rpc.ErrCorrupt", err)
	}
}
