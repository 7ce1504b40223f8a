# frozen_string_literal: true

require "test_helper"

# The pipe on which a USR2 successor tells the old master it answers the
# agent now: passed across exec in the environment, one byte means "stop",
# and the old master answers again if the successor dies.
class ControlAgentSuccessionTest < Minitest::Test
  Succession = Narwhal::Master::Control::Agent::Succession

  def setup
    @old = Succession.new
    @env = {}
  end

  def teardown
    @old.close
  end

  # What the exec does in USR2: the write end arrives in the new master
  # under the same number (here a copy of it, which the successor owns).
  def successor
    map = @old.pass_on_exec(@env)
    fd = map.keys.first
    assert_equal({ fd => fd }, map)
    assert_equal fd.to_s, @env[Succession::ENV_NAME]
    @copy = IO.for_fd(fd, autoclose: false).dup.tap { |io| io.autoclose = false }
    @env[Succession::ENV_NAME] = @copy.fileno.to_s
    Succession.new(predecessor: Succession.take(@env))
  end

  def readable?(succession, timeout = 2)
    !IO.select([succession.reader], nil, nil, timeout).nil?
  end

  def test_the_successor_announcing_itself_makes_the_old_master_yield
    new_master = successor
    assert_empty @env, "the variable is not passed on to the app"
    refute @old.yielded?
    new_master.announce
    assert readable?(@old)
    assert @old.on_readable, "announced"
    assert @old.yielded?
    @old.take_back # the successor died
    refute @old.yielded?
  ensure
    new_master&.close
  end

  # The old master keeps its own write end: a successor that exits (or a
  # copy closed in a worker) is no announcement.
  def test_only_the_byte_counts_never_an_end_of_file
    new_master = successor
    new_master.close
    refute IO.select([@old.reader], nil, nil, 0.2), "no end of file while the old master holds its write end"
    refute @old.yielded?
  end

  def test_without_a_predecessor_announcing_does_nothing
    alone = Succession.new
    assert_nil Succession.take(@env)
    alone.announce
    refute readable?(alone, 0.1), "nothing written"
  ensure
    alone&.close
  end
end
