package dev.rekey.yarn;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.io.Writable;
import org.apache.hadoop.mapreduce.InputFormat;
import org.apache.hadoop.mapreduce.InputSplit;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.RecordReader;
import org.apache.hadoop.mapreduce.TaskAttemptContext;

/**
 * Input without data: split i is map task i, and its one record is i, the
 * shard or part the task runs. rekey deals the snapshot's splits to shards
 * itself (size-balanced, the same in every process), so MapReduce needs to
 * know only how many tasks there are.
 */
public final class TaskInputFormat extends InputFormat<IntWritable, NullWritable> {
  /** The number of map tasks, set by the driver. */
  static final String TASKS = "rekey.tasks";

  @Override
  public List<InputSplit> getSplits(JobContext ctx) {
    int n = ctx.getConfiguration().getInt(TASKS, 0);
    if (n < 1) {
      throw new IllegalArgumentException(TASKS + " must be 1 or more, got " + n);
    }
    List<InputSplit> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(new TaskSplit(i));
    }
    return out;
  }

  @Override
  public RecordReader<IntWritable, NullWritable> createRecordReader(InputSplit split, TaskAttemptContext ctx) {
    return new OneRecord();
  }

  /** One task's split: its index and nothing else (no locality: rekey reads from HDFS anywhere). */
  public static final class TaskSplit extends InputSplit implements Writable {
    private int index;

    /** For Writable deserialization. */
    public TaskSplit() {}

    TaskSplit(int index) {
      this.index = index;
    }

    @Override
    public long getLength() {
      return 0;
    }

    @Override
    public String[] getLocations() {
      return new String[0];
    }

    @Override
    public void write(DataOutput out) throws IOException {
      out.writeInt(index);
    }

    @Override
    public void readFields(DataInput in) throws IOException {
      index = in.readInt();
    }
  }

  /** Reads the split's index as its only record. */
  static final class OneRecord extends RecordReader<IntWritable, NullWritable> {
    private int index;
    private boolean read;

    @Override
    public void initialize(InputSplit split, TaskAttemptContext ctx) {
      index = ((TaskSplit) split).index;
    }

    @Override
    public boolean nextKeyValue() {
      if (read) {
        return false;
      }
      read = true;
      return true;
    }

    @Override
    public IntWritable getCurrentKey() {
      return new IntWritable(index);
    }

    @Override
    public NullWritable getCurrentValue() {
      return NullWritable.get();
    }

    @Override
    public float getProgress() {
      return read ? 1 : 0;
    }

    @Override
    public void close() {}
  }
}
