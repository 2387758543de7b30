package shell

// redraws counts the control sequences in a stream that redraw a screen:
// cursor positioning (CSI H, CSI f), erasing the display (CSI J) and the
// alternate screen (CSI ? 1049 h, ? 1047 h, ? 47 h), as top, watch, a
// clock or vim print. A progress line or a countdown prints none of them
// (\r, erase in line CSI K, cursor up CSI A are not counted), so they tell a
// display that redraws each time its wait times out from a program that
// prints between key checks (see waitOut).
type redraws struct {
	n int
	// carry is the start of a sequence cut at the end of the last write.
	carry []byte
}

// redrawCarryMax bounds a sequence kept across writes; a longer one is no
// sequence this counts.
const redrawCarryMax = 32

func (r *redraws) note(b []byte) {
	if len(r.carry) > 0 {
		b = append(r.carry, b...)
		r.carry = nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != 0x1b {
			continue
		}
		end, redraw, complete := csi(b[i:])
		if !complete {
			if len(b)-i <= redrawCarryMax {
				r.carry = append([]byte(nil), b[i:]...)
			}
			return
		}
		if redraw {
			r.n++
		}
		i += end - 1
	}
}

// csi reads the sequence at the start of b (which begins with ESC): its
// length, whether it redraws a screen, and whether b holds all of it (false
// when b ends inside it).
func csi(b []byte) (n int, redraw, complete bool) {
	if len(b) < 2 {
		return 0, false, false
	}
	if b[1] != '[' {
		return 1, false, true
	}
	i, private := 2, false
	if i < len(b) && b[i] == '?' {
		private = true
		i++
	}
	start := i
	for i < len(b) && (b[i] >= '0' && b[i] <= '9' || b[i] == ';') {
		i++
	}
	if i == len(b) {
		return 0, false, false
	}
	params, final := string(b[start:i]), b[i]
	if private {
		return i + 1, final == 'h' && (params == "1049" || params == "1047" || params == "47"), true
	}
	return i + 1, final == 'H' || final == 'f' || final == 'J', true
}
