# frozen_string_literal: true

require "minitest/autorun"
require_relative "../lib/bench"

# The suite's report pieces: the numbers in its tables and its charts.
class SvgChartTest < Minitest::Test
  def chart(bars, **opts)
    Bench::SvgChart.new(title: "hello", unit: "req/s", bars: bars, **opts).to_svg
  end

  def widths(svg)
    svg.scan(/<rect class="bar"[^>]* width="([\d.]+)"/).flatten.map(&:to_f)
  end

  # The text of every <text> element, unescaped.
  def texts(svg)
    svg.scan(%r{<text[^>]*>([^<]*)</text>}).flatten.map do |t|
      t.gsub("&lt;", "<").gsub("&gt;", ">").gsub("&quot;", '"').gsub("&#39;", "'").gsub("&amp;", "&")
    end
  end

  def test_bars_are_proportional_to_their_values
    svg = chart([{ label: "narwhal", value: 100, highlight: true }, { label: "puma", value: 50 }])
    wide, narrow = widths(svg)
    assert_in_delta wide / 2, narrow, 1
  end

  def test_highlighted_bar_has_its_own_colour
    svg = chart([{ label: "narwhal", value: 10, highlight: true }, { label: "puma", value: 5 }])
    fills = svg.scan(/<rect class="bar"[^>]* fill="([^"]+)"/).flatten
    assert_equal [Bench::SvgChart::HIGHLIGHT, Bench::SvgChart::NEUTRAL], fills
  end

  def test_missing_value_is_said_not_drawn
    svg = chart([{ label: "narwhal", value: 10 }, { label: "unicorn", value: nil, note: "no response" }])
    assert_equal 1, widths(svg).size
    assert_includes svg, ">no response<"
  end

  def test_labels_are_escaped
    svg = chart([{ label: %(a<b & "c"), value: 1 }])
    assert_includes texts(svg), %(a<b & "c")
    refute_includes svg, %(a<b)
    assert svg.start_with?("<svg xmlns=")
    assert svg.end_with?("</svg>\n")
  end

  def test_axis_ends_at_a_round_number_above_the_largest_value
    svg = chart([{ label: "narwhal", value: 60_821, min: 59_000, max: 61_000 }])
    labels = texts(svg)
    assert_includes labels, "80k" # the axis end: 8 × 10^4
    assert_includes labels, "60,821 req/s"
  end

  def test_same_input_same_bytes
    bars = [{ label: "narwhal", value: 3.5, min: 3, max: 4 }]
    assert_equal chart(bars), chart(bars)
  end
end

class MarkdownTest < Minitest::Test
  def test_numbers_read_as_in_the_tables
    assert_equal "60,821", Bench::Markdown.number(60_821.4, "rps")
    assert_equal "0.21 ms", Bench::Markdown.number(0.21, "ms")
    assert_equal "4.5 ms", Bench::Markdown.number(4.53, "ms")
    assert_equal "412 ms", Bench::Markdown.number(412.2, "ms")
    assert_equal "288.0 MB", Bench::Markdown.number(288, "mb")
    assert_equal "16.1 µs", Bench::Markdown.number(16.08, "us")
    assert_equal "–", Bench::Markdown.number(nil, "ms")
  end

  def test_table_has_median_range_errors_and_ratio
    result = { "columns" => [{ "key" => "rps", "header" => "req/s", "format" => "rps" },
                             { "key" => "errors", "header" => "errors", "format" => "errors" }] }
    row = { "server" => "puma", "shape" => "1 × 1", "median" => { "rps" => 7500.0 }, "min" => { "rps" => 7000.0 },
            "max" => { "rps" => 8000.0 }, "sum" => { "errors" => 0 }, "ratio" => 0.125, "failures" => [] }
    lines = Bench::Markdown.table(result, { "rows" => [row] })
    assert_equal "| puma | 1 × 1 | 7,500 (7,000–8,000) | 0 | 0.12× |", lines.last
  end

  def test_a_paired_ratio_is_shown_when_it_differs
    result = { "columns" => [{ "key" => "rps", "header" => "req/s", "format" => "rps" }] }
    row = { "server" => "narwhal-baseline", "shape" => "1 process", "median" => { "rps" => 940.0 },
            "min" => { "rps" => 940.0 }, "max" => { "rps" => 940.0 }, "ratio" => 0.94, "paired_ratio" => 0.99,
            "failures" => [] }
    assert_equal "| narwhal-baseline | 1 process | 940 | 0.94× (paired 0.99×) |",
                 Bench::Markdown.table(result, { "rows" => [row] }).last
    row["paired_ratio"] = 0.941
    assert_equal "| narwhal-baseline | 1 process | 940 | 0.94× |", Bench::Markdown.table(result, { "rows" => [row] }).last
  end
end

# Runs measured in turn are compared in pairs: one slow spell in one
# server's runs moves its median, not the pairs' median.
class PairedRatioTest < Minitest::Test
  def test_median_of_the_runs_ratios
    report = Bench::Report.allocate
    report.instance_variable_set(:@scenario, Struct.new(:primary).new("rps"))
    narwhal = { "runs" => [{ "rps" => 100.0 }, { "rps" => 100.0 }, { "rps" => 200.0 }, { "failure" => "x" }] }
    other = { "runs" => [{ "rps" => 50.0 }, { "rps" => 101.0 }, { "rps" => 204.0 }, { "rps" => 1.0 }] }
    assert_equal 1.01, report.send(:paired_ratio, other, narwhal)
    assert_nil report.send(:paired_ratio, { "runs" => [{ "rps" => 1.0 }] }, { "runs" => [{ "rps" => 2.0 }] })
  end
end

# Each server against itself in another table (threads 5 over threads 1),
# and ratios to narwhal on more than the primary metric (io's p99).
class ComparisonTest < Minitest::Test
  def report(scenario, results)
    servers = %w[narwhal iodine].map { |n| Bench::SERVERS.fetch(n) }
    plan = scenario.variants.flat_map { |v| servers.map { |s| [v, s] } }
    Bench::Report.new(scenario, results, plan, 2, Time.now, true)
  end

  def scenario(**opts)
    variants = %w[t1 t5].map { |k| Bench::Variant.new(key: k, title: k, processes: 1, threads: 1) }
    Bench::Scenario.new(name: "x", title: "x", about: "x", variants: variants,
                        columns: [Bench::RPS, Bench::P99, Bench::CPU], primary: "rps", **opts)
  end

  def runs(*rps, cpu: 10.0, p99: 1.0)
    rps.map { |r| { "rps" => r, "cpu_us" => cpu, "p99_ms" => p99 } }
  end

  def test_each_server_over_itself_in_the_base_table
    results = { "t1" => { "narwhal" => runs(100.0, 110.0), "iodine" => runs(200.0, 200.0) },
                "t5" => { "narwhal" => runs(50.0, 55.0, cpu: 20.0), "iodine" => runs(180.0, 180.0) } }
    spec = Bench::Comparison.new(title: "t5 vs t1", variant: "t5", base: "t1", labels: ["threads 1", "threads 5"])
    doc = report(scenario(comparisons: [spec]), results).send(:document)
    rows = doc["comparisons"].first["rows"].to_h { |r| [r["server"], r["values"]] }
    assert_equal 0.5, rows["narwhal"]["rps"]["ratio"]
    assert_equal 0.5, rows["narwhal"]["rps"]["paired_ratio"]
    assert_equal 2.0, rows["narwhal"]["cpu_us"]["ratio"]
    assert_equal 0.9, rows["iodine"]["rps"]["ratio"]
    table = Bench::Markdown.scenario(doc)
    assert_includes table, "| narwhal | 105 | 53 | 0.50× | 10.0 µs | 20.0 µs | 2.00× |"
  end

  def test_further_ratio_columns_to_narwhal
    results = { "t1" => { "narwhal" => runs(100.0, 100.0, p99: 2.0), "iodine" => runs(150.0, 150.0, p99: 3.0) },
                "t5" => { "narwhal" => runs(1.0, 1.0), "iodine" => runs(1.0, 1.0) } }
    doc = report(scenario(ratios: ["p99_ms"]), results).send(:document)
    iodine = doc["variants"].first["rows"].find { |r| r["server"] == "iodine" }
    assert_equal 1.5, iodine["ratio"]
    assert_equal 1.5, iodine.dig("ratios", "p99_ms", "ratio")
    assert_includes Bench::Markdown.scenario(doc).lines.map(&:strip),
                    "| iodine | 1 × 1 | 150 | 3.0 ms | 10.0 µs | 1.50× | 1.50× |"
  end
end
