# frozen_string_literal: true

require "test_helper"
require "rbconfig"

# The pipe between the two generations of a USR2 upgrade: passed through a
# real exec with its terms, read as lines by the old master, and gone (at
# EOF) once the new master closed its end.
class MasterUpgradeChannelTest < Minitest::Test
  Channel = Narwhal::Master::Upgrade::Channel
  LIB = File.expand_path("../../../../lib", __dir__)
  # What a new master does with the channel: tells the terms it got back,
  # then gives up with a reason that has a line break in it.
  NEW_MASTER = <<~'RUBY'
    require "narwhal"
    channel = Narwhal::Master::Upgrade::Channel.take
    channel.tell(:terms, JSON.generate(channel.terms.merge("env_left" => ENV.key?("NARWHAL_UPGRADE"))))
    channel.tell(:serving)
    channel.tell(:failed, "0 of 2 workers ready\nwithin 2s")
  RUBY

  def test_the_new_master_speaks_to_the_old_one_across_exec
    channel = Channel.open({ "deadline" => 12.5, "timeout" => 2, "old_pid" => Process.pid })
    pid = fork do
      redirect = channel.pass_on_exec
      exec(RbConfig.ruby, "-I", LIB, "-e", NEW_MASTER, redirect)
    rescue Exception # rubocop:disable Lint/RescueException
      exit!(1) # never the test runner's at_exit in a child
    end
    channel.forked
    Process.wait(pid)
    kinds = channel.messages
    assert_equal %w[terms serving failed], kinds.map(&:first)
    terms = JSON.parse(kinds.first.last)
    assert_equal [12.5, 2, Process.pid, false], terms.values_at("deadline", "timeout", "old_pid", "env_left")
    assert_equal "0 of 2 workers ready within 2s", kinds.last.last, "one line, whatever the reason holds"
    assert_nil channel.reader, "at EOF the read end is closed: a sleep must not wake on it forever"
    assert_equal [], channel.messages
  ensure
    channel&.close
  end

  def test_lines_arrive_whole_and_are_read_as_they_complete
    reader, writer = IO.pipe
    old = Channel.new(reader, nil, {})
    new = Channel.new(nil, writer, {})
    writer.write("serv")
    assert_equal [], old.messages
    writer.write("ing\n")
    assert_equal [["serving", ""]], old.messages
    assert new.tell(:failed, "x" * 5000)
    assert_equal Channel::MAX_LINE, old.messages.first.join(" ").bytesize + 1, "cut below PIPE_BUF"
    new.close
    refute new.tell(:ready), "a closed channel says so"
    old.messages
    assert_nil old.reader
  end

  def test_a_master_not_started_by_usr2_has_no_channel
    assert_nil Channel.take({})
    env = { Channel::ENV_NAME => "not json" }
    assert_nil Channel.take(env)
    assert_empty env, "the variable goes, whatever it held"
    assert_nil Channel.take({ Channel::ENV_NAME => '{"fd": "seven"}' })
  end
end
