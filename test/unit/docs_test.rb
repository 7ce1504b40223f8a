# frozen_string_literal: true

require "test_helper"

# What the docs and the gem say about the code stays true of it.
class DocsTest < Minitest::Test
  ROOT = File.expand_path("../..", __dir__)

  def layout
    text = File.read(File.join(ROOT, "docs/ARCHITECTURE.md"))
    section = text[/^## Layout.*?(?=^## )/m] or flunk "docs/ARCHITECTURE.md has no Layout section"
    section.scan(/```\n(.*?)```/m).join
  end

  # [path, planned?] for each line of the layout that starts with a path
  def entries
    layout.lines.filter_map do |line|
      path = line[/\A(\S+)/, 1]
      [path, line.include?("*planned*")] if path
    end
  end

  # The layout is told by stages and folders: every top-level file of
  # lib/narwhal (a stage), every folder (its parts), every file of the
  # extension and the command are named.
  def test_the_layout_names_every_stage_folder_and_extension_file
    Dir.chdir(ROOT) do
      stages = Dir["lib/narwhal.rb", "lib/narwhal/*.rb", "exe/*"]
      missing = stages.reject { |f| layout.match?(/(^|\s)#{Regexp.escape(f)}\s/) }
      folders = Dir["lib/narwhal/**/"].map { |d| "#{File.basename(d)}/" } - ["narwhal/"]
      missing += folders.reject { |d| layout.match?(/(^|[\s(])#{Regexp.escape(d)}[\s:),]/) }
      ext = Dir["ext/narwhal_http/*.{c,h,rb}"].map { |f| File.basename(f) }
      missing += ext.reject { |f| layout.match?(%r{(ext/narwhal_http/|\s)#{Regexp.escape(f)}\s}) }
      assert_empty missing, "docs/ARCHITECTURE.md's layout does not name these"
    end
  end

  # rake test loads every test file into one process: two classes of one
  # name would merge, each one's setup and teardown running the other's
  # tests (a unit test and an integration test of the same stage).
  def test_test_classes_have_names_of_their_own
    files = Dir.chdir(ROOT) { Dir["test/**/*_test.rb", "bench/test/**/*_test.rb"] - Dir["test/apps/**/*"] }
    names = files.flat_map { |f| File.read(File.join(ROOT, f)).scan(/^class (\w+) < Minitest::Test/).flatten.map { |c| [c, f] } }
    repeated = names.group_by(&:first).select { |_, v| v.size > 1 }.transform_values { |v| v.map(&:last) }
    assert_empty repeated, "test classes defined in more than one file"
  end

  def test_code_the_layout_names_exists_unless_marked_planned
    entries.each do |path, planned|
      next unless path.start_with?("lib/", "ext/", "exe/")

      exists = File.exist?(File.join(ROOT, path))
      assert exists ^ planned, "#{path}: #{planned ? 'marked planned but exists' : 'does not exist'}"
    end
  end

  # Features that exist, and how the docs name them.
  SHIPPED = {
    "the control listener (control_listen, narwhal status)" =>
      /control (?:app|listener)|pumactl|\bstats\b|passenger-status|narwhal status/i,
    "metrics (GET /metrics)" => /\bmetrics\b|prometheus/i,
    "graceful TERM (term_graceful, drain_delay)" => /graceful TERM|term_graceful|drain/i,
    "recycling (worker_max_requests, worker_memory_limit)" => /max_requests|memory limit|recycl/i,
    "request threads (threads N)" => /\bthreads?\b/i,
    "graceful_timeout" => /shutdown_timeout|graceful_timeout/i
  }.freeze
  # What a text says of a feature it does not have (yet).
  MISSING = Regexp.union(/\bnot yet\b/i, /\bno \w+(?: \w+)? yet\b/i, /\b(?:is|are) coming\b/i, /\bcoming with\b/i,
                         /being added/i, /until then/i, /no control app/i, /not built in/i, /no directive/i,
                         /will be (?:added|built)/i)

  # A paragraph, a table row or a list item: where one claim is made.
  def claims(text)
    text.split(/\n\s*\n/).flat_map { |chunk| chunk.split(/\n(?=\||\s*[-*] )/) }
  end

  def documents
    Dir.chdir(ROOT) do
      (Dir["README.md", "docs/*.md", "examples/**/*"].select { |f| File.file?(f) } + ["lib/narwhal/configurator/puma_directives.rb"])
        .to_h { |f| [f, File.read(f)] }
    end
  end

  def test_no_doc_says_a_shipped_feature_is_missing
    wrong = documents.flat_map do |file, text|
      claims(text).filter_map do |claim|
        next unless claim.match?(MISSING)

        features = SHIPPED.select { |_, pattern| claim.match?(pattern) }.keys
        "#{file}: says #{features.join(' or ')} is missing: #{claim.strip[0, 200]}" unless features.empty?
      end
    end
    assert_empty wrong, "these claims are no longer true"
  end

  # The first cells of docs/CONFIGURATION.md's directive table ("`pid
  # PATH`", "`stderr_path PATH`, `stdout_path PATH`").
  def directive_cells
    text = File.read(File.join(ROOT, "docs/CONFIGURATION.md"))
    table = text[/^## Directives\n.*?\n((?:\|.*\n)+)/, 1] or flunk "docs/CONFIGURATION.md has no directive table"
    table.lines.grep(/\A\| `/).map { |row| row.split(" | ").first.delete_prefix("| ") }
  end

  def test_every_directive_has_one_row_in_configuration_md
    cells = directive_cells
    assert_empty cells.tally.select { |_, n| n > 1 }.keys, "rows that are there twice"
    names = cells.flat_map { |cell| cell.scan(/`(\w+)/).flatten }
    assert_empty Narwhal::Configurator::DSL.directives.map(&:to_s) - names, "directives without a row"
  end

  def test_the_gem_describes_what_narwhal_has
    spec = Gem::Specification.load(File.join(ROOT, "narwhal.gemspec"))
    assert_match(/thread/i, "#{spec.summary} #{spec.description}", "narwhal has request threads")
  end

  # Every test file OPERATIONS.md's "What survives what" names exists, and
  # every failure the table promises has a row.
  def test_what_survives_what_names_real_tests
    text = File.read(File.join(ROOT, "docs/OPERATIONS.md"))
    table = text[/^## What survives what\n.*?\n((?:\|.*\n)+)/m, 1] or flunk "OPERATIONS.md has no such table"
    files = table.scan(%r{`((?:unit|integration)/[\w/]+_test\.rb)`}).flatten.uniq
    refute_empty files
    assert_empty files.reject { |f| File.exist?(File.join(ROOT, "test", f)) }, "named tests that do not exist"
    failures = table.lines.drop(2).map { |row| row.split(" | ").first }
    ["a hook raises", "fork refused", "a client never reads", "disk full", "spool full", "a worker is killed",
     "the master is killed"].each do |failure|
      assert failures.any? { |f| f.include?(failure) }, "no row for #{failure}"
    end
  end
end
