package toolargs

import "testing"

func BenchmarkDecode(b *testing.B) {
	raw := []byte(`{"name":"echo hi","count":5000}`)
	b.ReportAllocs()
	for b.Loop() {
		var a args
		if err := Decode("bash", raw, &a, false, "{}"); err != nil {
			b.Fatal(err)
		}
	}
}
