// SPDX-License-Identifier: Apache-2.0

/// Latency figures for `shutterctl latency`: percentiles and a text histogram.
enum Latency {
    /// The nearest-rank percentile `p` (0 < p <= 100) of `values`, or nil for none.
    static func percentile(_ p: Double, of values: [Int64]) -> Int64? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// `label  p50  p90  p99  max`, microseconds, in fixed columns.
    static func row(_ label: String, _ values: [Int64]) -> String {
        let cells = [50.0, 90, 99, 100].map { percentile($0, of: values).map(String.init) ?? "-" }
        return pad(label, 20) + cells.map { leftPad($0, 9) }.joined()
    }

    static var header: String { pad("", 20) + ["p50", "p90", "p99", "max"].map { leftPad($0, 9) }.joined() }

    /// A histogram in power-of-two buckets of microseconds (below 64, 64-127, 128-255, ...),
    /// from the lowest bucket used to the highest, with bars up to `width` characters.
    static func histogram(_ values: [Int64], width: Int = 40) -> [String] {
        guard !values.isEmpty else { return [] }
        func bucket(_ v: Int64) -> Int { v < 64 ? 0 : (63 - v.leadingZeroBitCount) - 5 }
        var counts: [Int: Int] = [:]
        for v in values { counts[bucket(max(v, 0)), default: 0] += 1 }
        let top = counts.values.max()!
        let lowest = counts.keys.min()!
        let highest = counts.keys.max()!
        return (lowest...highest).map { b in
            let from: Int64 = b == 0 ? 0 : 64 << (b - 1)
            let to: Int64 = (b == 0 ? 64 : 64 << b) - 1
            let n = counts[b] ?? 0
            let bar = String(repeating: "#", count: n == 0 ? 0 : max(1, n * width / top))
            return leftPad(String(from), 8) + " - " + pad(String(to), 8) + " us |" + pad(bar, width) + " " + String(n)
        }
    }

    static func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
    static func leftPad(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }
}
