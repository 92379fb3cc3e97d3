# The egress forwarder: runs inside a harness's sandbox (its own network namespace, nothing but its
# loopback) as the parent of the harness command, and is the sandbox's only way out.
#
#   perl egress-forwarder.pl SOCKET PORT [LOCAL=HOST:PORT …] -- COMMAND [ARG …]
#
# 127.0.0.1:PORT is the proxy (HTTPS_PROXY): each connection is piped to SOCKET, factoryd's egress
# proxy for this run (egress-proxy.ts), which reads the request. Each LOCAL port on 127.0.0.1 is a
# trusted loopback destination outside (a model provider's base URL on this machine): a CONNECT to
# HOST:PORT is made through the proxy, then the bytes flow as they are.
#
# Once every port listens, this process becomes COMMAND (exec: its pid, stdio, exit status and
# signals are the harness's own, as without the forwarder), and a child of it relays the connections.
# The relay ends when the harness has: a pipe whose writing end only the harness holds reads as
# closed then (a wait on a signal could miss it, and a process outside a PID namespace, as in `user`
# mode, would outlive it).
#
# Perl, not Node: it starts with every run, and perl (perl-base, on every Debian and Ubuntu) starts in
# a few milliseconds where Node takes about 60 ms of CPU (docs/security.md, "Measured").
use strict;
use warnings;
use IO::Select;
use IO::Socket::INET;
use IO::Socket::UNIX;
use Fcntl ();
use POSIX ();
use Socket qw(SOCK_STREAM);

sub fail { print STDERR "factoryd egress forwarder: $_[0]\n"; POSIX::_exit(126) }

my ($split) = grep { $ARGV[$_] eq '--' } 0 .. $#ARGV;
fail('usage: SOCKET PORT [LOCAL=HOST:PORT …] -- COMMAND')
  unless defined $split && $split >= 2 && $split < $#ARGV;
my ($socket, $port, @maps) = @ARGV[0 .. $split - 1];
my @command = @ARGV[$split + 1 .. $#ARGV];

# Each listening socket with what a connection to it becomes: '' (piped as it is) or a CONNECT target.
my %target;
my $listening = IO::Select->new;
for my $map ("$port=", @maps) {
  my ($local, $connect) = split /=/, $map, 2;
  my $server = IO::Socket::INET->new(
    LocalAddr => '127.0.0.1', LocalPort => $local, Listen => 128, ReuseAddr => 1, Proto => 'tcp',
  ) or fail("cannot listen: 127.0.0.1:$local: $!");
  $target{ fileno $server } = $connect;
  $listening->add($server);
}

pipe(my $harness_gone, my $harness_alive) or fail("pipe: $!");
my $relay = fork // fail("cannot start the relay: $!");
if ($relay) {
  # The harness: keeps the pipe's writing end across exec (Perl closes every other descriptor).
  close $harness_gone;
  my $flags = fcntl($harness_alive, Fcntl::F_GETFD(), 0) // fail("fcntl: $!");
  fcntl($harness_alive, Fcntl::F_SETFD(), $flags & ~Fcntl::FD_CLOEXEC()) // fail("fcntl: $!");
  { no warnings 'exec'; exec { $command[0] } @command; }
  print STDERR "factoryd egress forwarder: cannot start the harness: $!\n";
  POSIX::_exit(127);
}

# The relay: nothing of the harness's stdio (the launcher reads it to its end), and deaf to the
# signals that stop the harness's group, so a harness finishing its last request is not cut off.
close $harness_alive;
open STDIN, '<', '/dev/null';
open STDOUT, '>', '/dev/null';
open STDERR, '>', '/dev/null';
$SIG{$_} = 'IGNORE' for qw(TERM INT HUP PIPE);
$SIG{CHLD} = 'IGNORE'; # connections' children reap themselves
my $ready = IO::Select->new($harness_gone, $listening->handles);
while (1) {
  for my $fh ($ready->can_read) {
    POSIX::_exit(0) if $fh == $harness_gone;
    my $client = $fh->accept or next;
    my $pid = fork;
    if (defined $pid && !$pid) {
      close $harness_gone;
      relay($client, $target{ fileno $fh });
      POSIX::_exit(0);
    }
    close $client;
  }
}

# Pipes `client` to the proxy; with `connect`, after the proxy answered that CONNECT with 200.
sub relay {
  my ($client, $connect) = @_;
  my $proxy = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $socket) or return;
  if ($connect) {
    write_all($proxy, "CONNECT $connect HTTP/1.1\r\nHost: $connect\r\n\r\n") or return;
    my $head = '';
    while ($head !~ /\r\n\r\n/) {
      sysread($proxy, $head, 65536, length $head) or return;
    }
    return unless $head =~ m{^HTTP/1\.[01] 200};
    my $rest = substr $head, index($head, "\r\n\r\n") + 4;
    write_all($client, $rest) or return if length $rest;
  }
  my %other = (fileno $client => $proxy, fileno $proxy => $client);
  my $open = IO::Select->new($client, $proxy);
  while ($open->count) {
    for my $from ($open->can_read) {
      my $to = $other{ fileno $from };
      my $n = sysread $from, my $chunk, 65536;
      return unless defined $n;
      if (!$n) {
        # This side is done sending: the other side hears so, and may still answer.
        shutdown $to, 1;
        $open->remove($from);
        next;
      }
      write_all($to, $chunk) or return;
    }
  }
}

sub write_all {
  my ($fh, $data) = @_;
  while (length $data) {
    my $n = syswrite $fh, $data;
    return 0 unless $n;
    substr $data, 0, $n, '';
  }
  return 1;
}
