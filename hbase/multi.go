package hbase

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// The Writer's Multi calls are encoded and decoded here by hand, with
// protowire, instead of through the generated structs: those cost a few
// allocations per row each way (an Action, a MutationProto and their
// optional scalars going out; a ResultOrException, its index and an empty
// Result coming back), which was most of the writer's garbage for small
// rows. The field numbers are those of hbase/pb/client.proto and
// hbase.proto; TestMultiCodec checks both directions against the
// generated code.
const (
	fMultiRegionAction = 1 // MultiRequest.regionAction
	fRASpec            = 1 // RegionAction.region
	fRAAction          = 3 // RegionAction.action
	fSpecType          = 1 // RegionSpecifier.type
	fSpecValue         = 2 // RegionSpecifier.value
	fActionIndex       = 1 // Action.index
	fActionMutation    = 2 // Action.mutation
	fMutRow            = 1 // MutationProto.row
	fMutType           = 2 // MutationProto.mutate_type
	fMutCellCount      = 8 // MutationProto.associated_cell_count

	fRespRegionResult = 1 // MultiResponse.regionActionResult
	fRARResult        = 1 // RegionActionResult.resultOrException
	fRARException     = 2 // RegionActionResult.exception
	fROEIndex         = 1 // ResultOrException.index
	fROEException     = 3 // ResultOrException.exception
)

func bytesFieldLen(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func varintFieldLen(num protowire.Number, v uint64) int {
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func mutationLen(m *mutation) int {
	return bytesFieldLen(fMutRow, len(m.row)) + varintFieldLen(fMutType, uint64(m.kind())) + varintFieldLen(fMutCellCount, uint64(m.n))
}

func actionLen(i int, m *mutation) int {
	return varintFieldLen(fActionIndex, uint64(i)) + bytesFieldLen(fActionMutation, mutationLen(m))
}

func specLen(r *Region) int {
	return varintFieldLen(fSpecType, uint64(pb.RegionSpecifier_REGION_NAME)) + bytesFieldLen(fSpecValue, len(r.Name))
}

func regionActionLen(rb *regionBatch) int {
	n := bytesFieldLen(fRASpec, specLen(rb.region))
	for i, m := range rb.muts {
		n += bytesFieldLen(fRAAction, actionLen(i, m))
	}
	return n
}

// appendMulti appends the MultiRequest of batch to dst: one RegionAction
// per region, one Action per mutation with its index in the region's list,
// each a MutationProto of the row, its type and its cell count (the cells
// travel in the call's cell block, in the same order).
func appendMulti(dst []byte, batch []*regionBatch) []byte {
	for _, rb := range batch {
		dst = protowire.AppendTag(dst, fMultiRegionAction, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(regionActionLen(rb)))
		dst = protowire.AppendTag(dst, fRASpec, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(specLen(rb.region)))
		dst = protowire.AppendTag(dst, fSpecType, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(pb.RegionSpecifier_REGION_NAME))
		dst = protowire.AppendTag(dst, fSpecValue, protowire.BytesType)
		dst = protowire.AppendBytes(dst, rb.region.Name)
		for i, m := range rb.muts {
			dst = protowire.AppendTag(dst, fRAAction, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(actionLen(i, m)))
			dst = protowire.AppendTag(dst, fActionIndex, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(i))
			dst = protowire.AppendTag(dst, fActionMutation, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(mutationLen(m)))
			dst = protowire.AppendTag(dst, fMutRow, protowire.BytesType)
			dst = protowire.AppendBytes(dst, m.row)
			dst = protowire.AppendTag(dst, fMutType, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(m.kind()))
			dst = protowire.AppendTag(dst, fMutCellCount, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(m.n))
		}
	}
	return dst
}

// multiResults walks an encoded MultiResponse. For each RegionActionResult,
// in order, region is called with its position and, when the whole region
// action failed, its exception (else nil); then action is called for each
// of its ResultOrExceptions with the action's index and its exception, if
// any. Fields the writer does not need (results, statistics, processed)
// are skipped. Malformed bytes give an error wrapping rpc.ErrCorrupt.
func multiResults(msg []byte, region func(i int, exc *pb.NameBytesPair), action func(i int, index uint32, exc *pb.NameBytesPair)) error {
	i := 0
	err := eachField(msg, "MultiResponse", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != fRespRegionResult || typ != protowire.BytesType {
			return nil
		}
		// The region exception comes after the results in the encoding,
		// but a region that failed has no results: find it first.
		var rexc *pb.NameBytesPair
		if err := eachField(v, "RegionActionResult", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num == fRARException && typ == protowire.BytesType {
				var err error
				rexc, err = exception(v, "region")
				return err
			}
			return nil
		}); err != nil {
			return err
		}
		region(i, rexc)
		if rexc == nil {
			if err := eachField(v, "RegionActionResult", func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != fRARResult || typ != protowire.BytesType {
					return nil
				}
				var index uint32
				var exc *pb.NameBytesPair
				if err := eachField(v, "ResultOrException", func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
					switch {
					case num == fROEIndex && typ == protowire.VarintType:
						index = uint32(x)
					case num == fROEException && typ == protowire.BytesType:
						var err error
						exc, err = exception(v, "action")
						return err
					}
					return nil
				}); err != nil {
					return err
				}
				action(i, index, exc)
				return nil
			}); err != nil {
				return err
			}
		}
		i++
		return nil
	})
	return err
}

// exception decodes the NameBytesPair of a region's or an action's
// exception in a MultiResponse (what names which).
func exception(v []byte, what string) (*pb.NameBytesPair, error) {
	exc := &pb.NameBytesPair{}
	if err := proto.Unmarshal(v, exc); err != nil {
		return nil, fmt.Errorf("%w: MultiResponse: %s exception: %v", rpc.ErrCorrupt, what, err)
	}
	return exc, nil
}

// eachField calls f for each field of the encoded message b: its number,
// wire type, and its bytes (length-delimited fields) or value (varints and
// fixed-width fields).
func eachField(b []byte, what string, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %s: bad field tag: %v", rpc.ErrCorrupt, what, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %s: field %d: %v", rpc.ErrCorrupt, what, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
