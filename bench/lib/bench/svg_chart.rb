# frozen_string_literal: true

module Bench
  # A horizontal bar chart as a standalone SVG document: one bar per server,
  # a whisker from the min to the max of the runs, narwhal's bar highlighted.
  # Deterministic: the same input gives the same bytes.
  class SvgChart
    WIDTH = 720
    BAR_HEIGHT = 18
    ROW_HEIGHT = 28
    TOP = 52
    BOTTOM = 34
    RIGHT = 150 # room for the value printed after the longest bar
    CHAR_WIDTH = 7 # rough width of a 12 px character, for the label column
    FONT = "system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
    HIGHLIGHT = "#1f6feb"
    NEUTRAL = "#8c959f"
    GRID = "#d0d7de"
    NICE_STEPS = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].freeze

    def initialize(title:, unit:, bars:, lower_is_better: false)
      @title = title
      @unit = unit
      @bars = bars
      @lower_is_better = lower_is_better
      @left = [bars.map { |b| b[:label].to_s.size }.max.to_i * CHAR_WIDTH + 16, 80].max
      @plot = WIDTH - @left - RIGHT
      @max = nice_max(bars.flat_map { |b| [b[:value], b[:max]] }.compact.map { |v| [v, 0].max }.max || 0)
    end

    def to_svg
      height = TOP + @bars.size * ROW_HEIGHT + BOTTOM
      [%(<svg xmlns="http://www.w3.org/2000/svg" width="#{WIDTH}" height="#{height}" ) +
        %(viewBox="0 0 #{WIDTH} #{height}" font-family="#{FONT}" font-size="12">),
       %(<rect width="#{WIDTH}" height="#{height}" fill="#ffffff"/>),
       text(12, 20, @title, size: 14, weight: "bold"),
       text(12, 38, "#{@unit}, #{@lower_is_better ? 'lower' : 'higher'} is better", fill: "#57606a"),
       *axis(height), *@bars.each_with_index.map { |b, i| bar(b, i) }, "</svg>", ""].join("\n")
    end

    private

    # The smallest round number (a NICE_STEP × 10^k) at or above +value+.
    def nice_max(value)
      return 1 if value <= 0

      magnitude = 10**Math.log10(value).floor
      NICE_STEPS.map { |s| s * magnitude }.find { |m| m >= value }
    end

    def x(value)
      @left + (value.to_f.clamp(0, @max) / @max * @plot)
    end

    def axis(height)
      ticks = 5
      (0..ticks).flat_map do |i|
        value = @max * i / ticks.to_f
        gx = x(value).round(1)
        [%(<line x1="#{gx}" y1="#{TOP - 6}" x2="#{gx}" y2="#{height - BOTTOM + 4}" stroke="#{GRID}"/>),
         text(gx, height - BOTTOM + 18, compact(value), anchor: "middle", fill: "#57606a", size: 11)]
      end
    end

    def bar(bar, index)
      y = TOP + index * ROW_HEIGHT
      mid = y + BAR_HEIGHT / 2.0 + 4
      parts = [text(@left - 8, mid, bar[:label], anchor: "end")]
      value = bar[:value]
      if value.nil?
        parts << text(@left + 4, mid, bar[:note] || "n/a", fill: "#57606a")
        return parts.join("\n")
      end
      width = (x(value) - @left).round(1)
      colour = bar[:highlight] ? HIGHLIGHT : NEUTRAL
      parts << %(<rect class="bar" x="#{@left}" y="#{y}" width="#{width}" height="#{BAR_HEIGHT}" fill="#{colour}"/>)
      parts.concat(whisker(bar, y))
      end_x = [x(value), bar[:max] ? x(bar[:max]) : 0].max + 6
      label = "#{number(value)} #{@unit}"
      label += " — #{bar[:note]}" if bar[:note]
      parts << text(end_x.round(1), mid, label)
      parts.join("\n")
    end

    def whisker(bar, y)
      low = bar[:min]
      high = bar[:max]
      return [] unless low && high && high > low

      mid = y + BAR_HEIGHT / 2.0
      x1 = x(low).round(1)
      x2 = x(high).round(1)
      [%(<line x1="#{x1}" y1="#{mid}" x2="#{x2}" y2="#{mid}" stroke="#24292f"/>),
       %(<line x1="#{x1}" y1="#{mid - 4}" x2="#{x1}" y2="#{mid + 4}" stroke="#24292f"/>),
       %(<line x1="#{x2}" y1="#{mid - 4}" x2="#{x2}" y2="#{mid + 4}" stroke="#24292f"/>)]
    end

    def text(x, y, content, anchor: "start", fill: "#24292f", size: nil, weight: nil)
      attrs = %(x="#{x}" y="#{y}" text-anchor="#{anchor}" fill="#{fill}")
      attrs += %( font-size="#{size}") if size
      attrs += %( font-weight="#{weight}") if weight
      "<text #{attrs}>#{escape(content)}</text>"
    end

    def escape(str)
      str.to_s.gsub(/[&<>"']/, "&" => "&amp;", "<" => "&lt;", ">" => "&gt;", '"' => "&quot;", "'" => "&#39;")
    end

    # 60821 -> "60,821"; 2.4137 -> "2.41"; 0.35 -> "0.35"
    def number(value)
      return Markdown.delimit(value.round) if value >= 100

      format("%.3g", value)
    end

    # Tick labels: 60000 -> "60k", 1500000 -> "1.5M".
    def compact(value)
      return format("%gM", (value / 1e6).round(2)) if value >= 1e6
      return format("%gk", (value / 1e3).round(2)) if value >= 1e3

      format("%g", value.round(3))
    end
  end
end
