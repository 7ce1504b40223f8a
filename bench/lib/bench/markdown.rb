# frozen_string_literal: true

module Bench
  # Markdown tables of a scenario's summarised results.
  module Markdown
    module_function

    def scenario(result)
      lines = ["## #{result['title']}", "", result["about"], ""]
      result["variants"].each do |variant|
        lines << "### #{variant['title']}" << ""
        lines.concat(table(result, variant)) << ""
      end
      result["comparisons"].to_a.each do |comparison|
        lines << "### #{comparison['title']}" << ""
        lines.concat(comparison(result, comparison)) << ""
      end
      lines.join("\n")
    end

    def table(result, variant)
      columns = result["columns"]
      extra = result["ratios"].to_a.map { |key| columns.find { |c| c["key"] == key } }
      head = ["server", "processes × threads", *columns.map { |c| c["header"] }, "vs narwhal",
              *extra.map { |c| "#{c['header']} vs narwhal" }]
      rows = [row(head), row(head.map.with_index { |_, i| i < 2 ? "---" : "---:" })]
      notes = []
      variant["rows"].each do |r|
        cells = columns.map { |c| cell(r, c, notes) }
        ratios = extra.map { |c| ratio(r.dig("ratios", c["key"]) || {}) }
        rows << row([r["server"], r["shape"], *cells, ratio(r), *ratios])
        r["failures"].each { |f| notes << "#{r['server']}: #{f}" }
      end
      rows + notes.uniq.map { |n| "\n#{n}" }
    end

    def row(cells)
      "| #{cells.join(' | ')} |"
    end

    # Median of the runs, with min–max when the runs differ.
    def cell(row, column, notes)
      key = column["key"]
      if column["format"] == "errors"
        text = number(row.dig("sum", key), "count")
        if row["eof_framed"]
          notes << EOF_NOTE
          text += "¹"
        end
        return text
      end
      med = row.dig("median", key)
      return "–" if med.nil?

      min = row.dig("min", key)
      max = row.dig("max", key)
      text = number(med, column["format"])
      text += " (#{number(min, column['format'])}–#{number(max, column['format'])})" if min != max && !min.nil?
      text
    end

    # Each server against itself in another variant: both medians and the
    # ratio, for each compared metric.
    def comparison(result, comparison)
      first, second = comparison["labels"]
      columns = comparison["keys"].map { |key| result["columns"].find { |c| c["key"] == key } }
      head = ["server", *columns.flat_map do |c|
        ["#{c['header']}, #{first}", "#{c['header']}, #{second}", "#{second} vs #{first}"]
      end]
      lines = [row(head), row(head.map.with_index { |_, i| i.zero? ? "---" : "---:" })]
      comparison["rows"].each do |r|
        cells = columns.flat_map do |c|
          v = r["values"][c["key"]]
          [number(v["base"], c["format"]), number(v["value"], c["format"]), ratio(v)]
        end
        lines << row([r["server"], *cells])
      end
      lines
    end

    # The ratio of medians, and the median of the runs' ratios when it
    # differs (Runner#paired_ratio).
    def ratio(row)
      return "–" unless row["ratio"]

      text = format("%.2f×", row["ratio"])
      paired = row["paired_ratio"] && format("%.2f×", row["paired_ratio"])
      paired && paired != text ? "#{text} (paired #{paired})" : text
    end

    EOF_NOTE = "¹ wrk read errors, as many as responses: the server ends each response by closing the " \
               "connection in a way wrk counts as a read error (unicorn sends this app's responses without " \
               "Content-Length, so the close is what ends them). The responses are complete; these are " \
               "not failed requests."

    def number(value, fmt)
      return "–" if value.nil?

      case fmt
      when "rps", "count" then delimit(value.round)
      when "ms" then value < 1 ? format("%.2f ms", value) : format("%.#{value < 100 ? 1 : 0}f ms", value)
      when "mb" then format("%.1f MB", value)
      when "us" then format("%.1f µs", value)
      when "s" then format("%.2f s", value)
      else value.to_s
      end
    end

    def delimit(int)
      int.to_s.reverse.scan(/\d{1,3}/).join(",").reverse.then { |s| int.negative? ? "-#{s}" : s }
    end
  end
end
