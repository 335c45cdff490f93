sd.mesh @mesh = <["data"=0]>
